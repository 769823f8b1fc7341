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
    "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
run(${CMAKE_COMMAND} --build ${CONSUMER_BUILD})
run(${CONSUMER_BUILD}/consumer)
if(NOT last_output MATCHES "y\\[gl_GlobalInvocationID.x\\] = \\(pc.a \\* x\\[gl_GlobalInvocationID.x\\]\\)")
  message(FATAL_ERROR "consumer printed unexpected GLSL:\n${last_output}")
endif()
message(STATUS "consumer built against the installed package and printed its kernel")
