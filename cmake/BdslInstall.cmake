# `cmake --install` puts the libraries, headers, golden data and an exported CMake package in
# place, so another project can `find_package(bitnet_dsl)`, link `bitnet_dsl::bitnet_dsl` and
# include <bitnet_dsl/dsl/dsl.h>.
include(CMakePackageConfigHelpers)

install(TARGETS ${BDSL_LIBRARIES} bitnet_dsl EXPORT bitnet_dsl_targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Headers under the project's prefix only (no generic runtime/buffer.h on the include path): the
# project's own includes inside them are rewritten to the prefixed form as they are installed.
install(CODE "set(BDSL_SOURCE \"${PROJECT_SOURCE_DIR}\")
  set(BDSL_HEADER_DIRS \"${BDSL_HEADER_DIRS}\")
  set(BDSL_DESTINATION \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}/bitnet_dsl\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/BdslInstallHeaders.cmake\")")
# The golden data `bitnet-dsl validate` checks the tiny model against by default.
install(DIRECTORY golden/data/ DESTINATION ${CMAKE_INSTALL_DATADIR}/bitnet-dsl/golden)
install(EXPORT bitnet_dsl_targets NAMESPACE bitnet_dsl::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/bitnet_dsl)
configure_package_config_file(cmake/bitnet_dslConfig.cmake.in
  ${PROJECT_BINARY_DIR}/bitnet_dslConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/bitnet_dsl)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/bitnet_dslConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/bitnet_dslConfig.cmake
  ${PROJECT_BINARY_DIR}/bitnet_dslConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/bitnet_dsl)
