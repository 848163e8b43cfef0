# tess_add_test(NAME TARGET tgt [NPROCS n] [ARGS ...] [LABELS ...] [TIMEOUT s] [ENV ...])
# Runs $<TARGET_FILE:tgt> under mpiexec with n ranks (default 1) in its own working directory
# (out/NAME), with one BLAS/OpenMP thread per rank and HDF5 file locking off. Oversubscription
# and run-as-root are machine facts: tests/run.sh exports them, not this helper.
function(tess_add_test name)
  cmake_parse_arguments(arg "" "TARGET;NPROCS;TIMEOUT" "ARGS;LABELS;ENV" ${ARGN})
  if(NOT arg_NPROCS)
    set(arg_NPROCS 1)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/out/${name})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME ${name} WORKING_DIRECTORY ${dir}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${arg_NPROCS}
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${arg_TARGET}> ${MPIEXEC_POSTFLAGS} ${arg_ARGS})
  set_tests_properties(${name} PROPERTIES PROCESSORS ${arg_NPROCS} TIMEOUT ${arg_TIMEOUT}
      LABELS "${arg_LABELS}"
      ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;HDF5_USE_FILE_LOCKING=FALSE;${arg_ENV}")
endfunction()

# tess_add_fail_test(NAME TARGET tgt CODE c REGEX re [NPROCS n] [ARGS ...] [LABELS ...])
# Passes only if the program exits with exactly code c AND its output matches re
# (PASS_REGULAR_EXPRESSION alone ignores the exit code). Uses tests/expect_fail.sh.
function(tess_add_fail_test name)
  cmake_parse_arguments(arg "" "TARGET;NPROCS;CODE;REGEX;TIMEOUT" "ARGS;LABELS" ${ARGN})
  if(NOT arg_NPROCS)
    set(arg_NPROCS 1)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 60)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/out/${name})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME ${name} WORKING_DIRECTORY ${dir}
           COMMAND bash ${PROJECT_SOURCE_DIR}/tests/expect_fail.sh ${arg_CODE} ${arg_REGEX} --
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${arg_NPROCS}
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${arg_TARGET}> ${MPIEXEC_POSTFLAGS} ${arg_ARGS})
  set_tests_properties(${name} PROPERTIES PROCESSORS ${arg_NPROCS} TIMEOUT ${arg_TIMEOUT}
      LABELS "${arg_LABELS}"
      ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;HDF5_USE_FILE_LOCKING=FALSE")
endfunction()

# tess_add_test_exe(tgt src...) : a test program linked against libtessera and the test header.
function(tess_add_test_exe tgt)
  add_executable(${tgt} ${ARGN})
  target_link_libraries(${tgt} PRIVATE tessera)
  target_include_directories(${tgt} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
endfunction()
