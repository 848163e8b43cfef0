# Test helpers of the whole suite. Every test runs in its own working directory (out/NAME under
# the calling directory's build dir), with one BLAS/OpenMP thread per rank and HDF5 file locking
# off; PROCESSORS is the rank count, so ctest -j never oversubscribes more than asked. Exit code
# 77 means "skipped" (shared data or a Python module is absent). Oversubscription and
# run-as-root are machine facts: tests/run.sh exports them, not these helpers.
# TESS_TEST_ENV is that environment. In it,
# OMPI_MCA_odls_base_sigkill_timeout=0: when a rank exits non-zero or aborts, Open MPI 4.1's
# mpiexec signals the job's processes and sleeps this many seconds (default 1) twice before it
# returns, even when every rank has already exited: 2 s of idle wait per failing mpiexec (every
# expected exit code, every stopped run that exits 75). No test using it signals mpiexec; the
# Slurm tests (a SIGTERM to mpirun inside a job must leave the ranks time to checkpoint) keep
# Open MPI's default.
# tess_session_env(NAME OUT) is the test's own Open MPI session directory, ompi-session/NAME in
# the build tree, for every test that starts MPI programs: with every mpiexec and singleton
# sharing /tmp/ompi.HOST.UID, one test's exit removes that directory when it is empty while
# another test's mpiexec is creating it, and that mpiexec fails in orte_init ("mkdir ... File
# exists").
#
#   tess_add_test(NAME TARGET tgt [NPROCS n] [ARGS ...] [LABELS ...] [TIMEOUT s] [ENV ...])
#       $<TARGET_FILE:tgt> ARGS under mpiexec with n ranks (default 1); passes on exit code 0.
#   tess_add_fail_test(NAME TARGET tgt CODE c REGEX re [NPROCS n] [ARGS ...] [LABELS ...]
#                      [TIMEOUT s] [ENV ...])
#       the same, but passes only if the program exits with exactly code c AND its output matches
#       the extended regex re (PASS_REGULAR_EXPRESSION alone ignores the exit code); through
#       tests/expect_fail.sh.
#   tess_add_script_test(NAME SCRIPT file [NPROCS n] [ARGS ...] [LABELS ...] [TIMEOUT s] [ENV ...])
#       bash file ARGS: end-to-end checks that run programs the way a user does. The script gets
#       what it runs as arguments (${MPIEXEC_EXECUTABLE}, $<TARGET_FILE:...>); n is the largest
#       rank count it starts on the cores (default 1).
# Default TIMEOUT: 120 s (60 s for fail tests).

set(TESS_TEST_ENV "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;HDF5_USE_FILE_LOCKING=FALSE"
    "OMPI_MCA_odls_base_sigkill_timeout=0")

# OUT = the environment entry of test NAME's Open MPI session directory (Open MPI creates it).
function(tess_session_env name out)
  set(${out} "OMPI_MCA_orte_tmpdir_base=${PROJECT_BINARY_DIR}/ompi-session/${name}" PARENT_SCOPE)
endfunction()

# The working directory and the properties every helper sets.
function(_tess_test_dir name out)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/out/${name})
  file(MAKE_DIRECTORY ${dir})
  set(${out} ${dir} PARENT_SCOPE)
endfunction()

function(_tess_test_props name nprocs timeout labels env)
  tess_session_env(${name} session)
  set_tests_properties(${name} PROPERTIES PROCESSORS ${nprocs} TIMEOUT ${timeout}
      LABELS "${labels}" SKIP_RETURN_CODE 77
      ENVIRONMENT "${TESS_TEST_ENV};${session};${env}")
endfunction()

function(tess_add_test name)
  cmake_parse_arguments(arg "" "TARGET;NPROCS;TIMEOUT" "ARGS;LABELS;ENV" ${ARGN})
  if(NOT arg_NPROCS)
    set(arg_NPROCS 1)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  _tess_test_dir(${name} dir)
  add_test(NAME ${name} WORKING_DIRECTORY ${dir}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${arg_NPROCS}
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${arg_TARGET}> ${MPIEXEC_POSTFLAGS} ${arg_ARGS})
  _tess_test_props(${name} ${arg_NPROCS} ${arg_TIMEOUT} "${arg_LABELS}" "${arg_ENV}")
endfunction()

function(tess_add_fail_test name)
  cmake_parse_arguments(arg "" "TARGET;NPROCS;CODE;REGEX;TIMEOUT" "ARGS;LABELS;ENV" ${ARGN})
  if(NOT arg_NPROCS)
    set(arg_NPROCS 1)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 60)
  endif()
  _tess_test_dir(${name} dir)
  add_test(NAME ${name} WORKING_DIRECTORY ${dir}
           COMMAND bash ${PROJECT_SOURCE_DIR}/tests/expect_fail.sh ${arg_CODE} ${arg_REGEX} --
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${arg_NPROCS}
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${arg_TARGET}> ${MPIEXEC_POSTFLAGS} ${arg_ARGS})
  _tess_test_props(${name} ${arg_NPROCS} ${arg_TIMEOUT} "${arg_LABELS}" "${arg_ENV}")
endfunction()

function(tess_add_script_test name)
  cmake_parse_arguments(arg "" "SCRIPT;NPROCS;TIMEOUT" "ARGS;LABELS;ENV" ${ARGN})
  if(NOT arg_NPROCS)
    set(arg_NPROCS 1)
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  _tess_test_dir(${name} dir)
  add_test(NAME ${name} WORKING_DIRECTORY ${dir} COMMAND bash ${arg_SCRIPT} ${arg_ARGS})
  _tess_test_props(${name} ${arg_NPROCS} ${arg_TIMEOUT} "${arg_LABELS}" "${arg_ENV}")
endfunction()

# tess_add_test_exe(tgt src...) : a test program linked against libtessera and the test header.
function(tess_add_test_exe tgt)
  add_executable(${tgt} ${ARGN})
  target_link_libraries(${tgt} PRIVATE tessera)
  target_include_directories(${tgt} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
endfunction()
