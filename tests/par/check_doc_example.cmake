# check_doc_example.cmake - cmake -DDOC=<page.md> -DSRC=<test.c> -P check_doc_example.cmake
# Fails unless the first ```c block of DOC appears verbatim in SRC, the test that compiles and
# runs it, so a documented example cannot drift from code that works.
file(READ "${DOC}" doc)
file(READ "${SRC}" src)
string(FIND "${doc}" "```c\n" start)
if(start LESS 0)
  message(FATAL_ERROR "${DOC} has no ```c block")
endif()
math(EXPR start "${start} + 5")
string(SUBSTRING "${doc}" ${start} -1 rest)
string(FIND "${rest}" "```" end)
string(SUBSTRING "${rest}" 0 ${end} block)
string(FIND "${src}" "${block}" at)
if(at LESS 0)
  message(FATAL_ERROR "the example in ${DOC} is not a verbatim part of ${SRC}: update one of them")
endif()
message(STATUS "the example in ${DOC} is compiled by ${SRC}")
