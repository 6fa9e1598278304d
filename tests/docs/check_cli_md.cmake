# check_cli_md.cmake: run `LOADLAW help --markdown` into OUT and compare it
# byte for byte with the committed DOC (docs/cli.md). Fails with the diff and
# the command that regenerates DOC.
foreach(v LOADLAW DOC OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_cli_md.cmake: -D${v}=... is required")
  endif()
endforeach()
execute_process(COMMAND ${LOADLAW} help --markdown OUTPUT_FILE ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "`${LOADLAW} help --markdown` exited with ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${DOC} ${OUT} RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  find_program(DIFF diff)
  if(DIFF)
    execute_process(COMMAND ${DIFF} -u ${DOC} ${OUT})
  endif()
  message(FATAL_ERROR "${DOC} differs from `loadlaw help --markdown`; regenerate it:\n"
                      "  ${LOADLAW} help --markdown > ${DOC}")
endif()
