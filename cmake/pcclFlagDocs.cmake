# Writes a document that the pccl binary generates from its flag tables (cli/opts, cli/flag_docs.c):
#   -DMODE=completions -DARG=SHELL -DOUT=FILE   `pccl help --completions SHELL`
#   -DMODE=man -DARG=CMD -DSRC=PAGE -DOUT=FILE  PAGE (man/pccl-CMD.1.scd) with its "; @OPTIONS@" line replaced by
#                                               `pccl help --man CMD` and its "; @SYNOPSIS@" line by
#                                               `pccl help --synopsis CMD`
# -DPCCL=BINARY, run through -DEMULATOR when cross-compiling. OUT is only rewritten when its text changes.
execute_process(COMMAND ${EMULATOR} ${PCCL} help --${MODE} ${ARG}
  OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pccl help --${MODE} ${ARG} failed (${rc}): ${err}")
endif()
if(MODE STREQUAL "man")
  execute_process(COMMAND ${EMULATOR} ${PCCL} help --synopsis ${ARG}
    OUTPUT_VARIABLE synopsis ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pccl help --synopsis ${ARG} failed (${rc}): ${err}")
  endif()
  file(READ ${SRC} page)
  foreach(part OPTIONS SYNOPSIS)
    string(REGEX MATCH "\n; @${part}@[^\n]*\n" marker "${page}")
    if(NOT marker)
      message(FATAL_ERROR "${SRC} has no '; @${part}@' line where its ${part} go")
    endif()
    if(part STREQUAL "OPTIONS")
      string(REPLACE "${marker}" "\n${text}" page "${page}")
    else()
      string(REPLACE "${marker}" "\n${synopsis}" page "${page}")
    endif()
  endforeach()
  set(text "${page}")
endif()
file(WRITE ${OUT}.tmp "${text}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
file(REMOVE ${OUT}.tmp)
