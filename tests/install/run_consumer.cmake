# cmake -P script: install, configure the consumer against the prefix, build it, run it.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${PREFIX} ${CONSUMER_BUILD})
run(${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${PREFIX})
# A sanitized library needs its runtime in the consumer's link too (SANITIZE_FLAGS, space-separated).
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${CONSUMER_BUILD} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${PREFIX}
    -DHOST_PROGRAM=${HOST_PROGRAM}
    "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
run(${CMAKE_COMMAND} --build ${CONSUMER_BUILD})
run(${CONSUMER_BUILD}/consumer)
if(NOT last_output MATCHES "y\\[gl_GlobalInvocationID.x\\] = \\(pc.a \\* x\\[gl_GlobalInvocationID.x\\]\\)")
  message(FATAL_ERROR "consumer printed unexpected GLSL:\n${last_output}")
endif()
# Only the prefixed headers are installed: nothing generic such as include/runtime/buffer.h.
foreach(dir dsl runtime codegen)
  if(EXISTS ${PREFIX}/include/${dir} OR NOT EXISTS ${PREFIX}/include/bitnet_dsl/${dir})
    message(FATAL_ERROR "headers of ${dir}/ are not (only) under include/bitnet_dsl/")
  endif()
endforeach()
run(${CONSUMER_BUILD}/host_program)
if(NOT last_output MATCHES "\nok\n")
  message(FATAL_ERROR "the host program did not end with ok:\n${last_output}")
endif()
# The installed tool validates the tiny model against the installed golden data by default.
run(${PREFIX}/bin/bitnet-dsl make-model ${CONSUMER_BUILD}/tiny.gguf --preset tiny)
run(${PREFIX}/bin/bitnet-dsl validate -m ${CONSUMER_BUILD}/tiny.gguf)
if(NOT last_output MATCHES "share/bitnet-dsl/golden/tiny")
  message(FATAL_ERROR "validate did not use the installed golden data:\n${last_output}")
endif()
message(STATUS "consumer and host program built against the installed package; validate passed with the installed golden data")
