# `cmake --install` puts the libraries, headers and an exported CMake package in place, so
# another project can `find_package(bitnet_dsl)` and link `bitnet_dsl::bitnet_dsl`.
include(CMakePackageConfigHelpers)

install(TARGETS ${BDSL_LIBRARIES} bitnet_dsl EXPORT bitnet_dsl_targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/bitnet_dsl)
foreach(dir dsl codegen runtime ops models golden serve)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/bitnet_dsl/${dir}
    FILES_MATCHING PATTERN "*.h")
endforeach()
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
