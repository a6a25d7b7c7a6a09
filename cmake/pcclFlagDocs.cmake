# Writes a document that the pccl binary generates from its flag tables (cli/opts, cli/flag_docs.c):
#   -DMODE=completions -DARG=SHELL -DOUT=FILE   `pccl help --completions SHELL`
#   -DMODE=man -DARG=CMD -DSRC=PAGE -DOUT=FILE  PAGE (man/pccl-CMD.1.scd) with its "; @OPTIONS@" line replaced by
#                                               `pccl help --man CMD`
# -DPCCL=BINARY, run through -DEMULATOR when cross-compiling. OUT is only rewritten when its text changes.
execute_process(COMMAND ${EMULATOR} ${PCCL} help --${MODE} ${ARG}
  OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pccl help --${MODE} ${ARG} failed (${rc}): ${err}")
endif()
if(MODE STREQUAL "man")
  file(READ ${SRC} page)
  string(REGEX MATCH "\n; @OPTIONS@[^\n]*\n" marker "${page}")
  if(NOT marker)
    message(FATAL_ERROR "${SRC} has no '; @OPTIONS@' line where its OPTIONS go")
  endif()
  string(REPLACE "${marker}" "\n${text}" text "${page}")
endif()
file(WRITE ${OUT}.tmp "${text}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
file(REMOVE ${OUT}.tmp)
