# Each bad invocation must exit non-zero with one line on stderr that names
# the problem.
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/garbage.tpu "this is not a program")
file(WRITE ${WORK}/bad.s "nop\nfrob s1\n")
file(WRITE ${WORK}/good.s ".target tiny\nhalt\n")

function(expect_failure expected)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected failure: ${ARGN}")
  endif()
  if(NOT err MATCHES "${expected}")
    message(FATAL_ERROR "${ARGN}: stderr does not match '${expected}':\n${err}")
  endif()
endfunction()

expect_failure("tpu-objdump: error: .*garbage.tpu: header section, offset 0: not a .tpu program" ${BIN}/tpu-objdump ${WORK}/garbage.tpu)
expect_failure("cannot open file" ${BIN}/tpu-objdump ${WORK}/missing.tpu)
expect_failure("tpu-objdump: error: .*--frobnicate" ${BIN}/tpu-objdump --frobnicate ${WORK}/garbage.tpu)
expect_failure("bad.s:2:1: error: unknown instruction 'frob'" ${BIN}/tpu-as ${WORK}/bad.s -o ${WORK}/bad.tpu)
expect_failure("tpu-as: error: unknown preset 'nope'" ${BIN}/tpu-as ${WORK}/good.s -o ${WORK}/g.tpu --config nope)
expect_failure("differs from --config" ${BIN}/tpu-as ${WORK}/good.s -o ${WORK}/g.tpu --config v5e)
expect_failure("tpu-as: error: .*required" ${BIN}/tpu-as ${WORK}/good.s)
