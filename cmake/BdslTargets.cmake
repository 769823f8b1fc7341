# One library per source folder: every .cpp in the folder, headers beside them.
# Globbing keeps parallel work from fighting over CMakeLists.txt.
set(BDSL_LIBRARIES "" CACHE INTERNAL "")
# The folders whose headers are public, installed under include/bitnet_dsl/.
set(BDSL_HEADER_DIRS dsl codegen runtime ops models golden serve)

set(BDSL_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 reports false positives inside std::string (GCC bug 105651).
  list(APPEND BDSL_WARNINGS -Wno-restrict)
endif()

# SUBDIRS: the sources of these folders below too (a library split into families, as ops/;
# models/ also holds libraries of its own beside them).
function(bdsl_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;PRIVATE_DEPS;EXCLUDE;SUBDIRS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  foreach(sub IN LISTS ARG_SUBDIRS)
    file(GLOB sub_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${sub}/*.cpp)
    list(APPEND sources ${sub_sources})
  endforeach()
  foreach(ex IN LISTS ARG_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX "/${ex}$")
  endforeach()
  if(NOT sources)  # a folder not yet written: an empty interface target keeps the graph whole
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
    set(BDSL_LIBRARIES ${BDSL_LIBRARIES} ${name} CACHE INTERNAL "")
    return()
  endif()
  add_library(${name} STATIC ${sources})
  target_compile_options(${name} PRIVATE ${BDSL_WARNINGS})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  set(BDSL_LIBRARIES ${BDSL_LIBRARIES} ${name} CACHE INTERNAL "")
endfunction()

# A test executable per folder under tests/: every .cpp in it.
function(bdsl_test_suite name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(NOT sources)
    return()
  endif()
  add_executable(${name} ${sources})
  target_compile_options(${name} PRIVATE ${BDSL_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    BDSL_SOURCE_DIR="${PROJECT_SOURCE_DIR}" BDSL_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # Tests are named "<area>.<Suite>.<Test>", so `ctest -R runtime` selects a whole area.
  string(REGEX REPLACE "^bdsl_(.*)_tests$" "\\1" area ${name})
  include(GoogleTest)
  gtest_discover_tests(${name} TEST_PREFIX "${area}." DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endfunction()
