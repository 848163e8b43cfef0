# cmake --install: libtessera, the public headers, every program, and the files that let other
# projects use an installed Tessera (docs/install.md):
#   <prefix>/lib/libtessera.a
#   <prefix>/include/tessera/{core,tensor,nn,optim,par,io,...}/*.h   (-I<prefix>/include/tessera)
#   <prefix>/bin/{tinylm,zo,tess-ckpt,tess-convert}                   (apps/CMakeLists.txt)
#   <prefix>/lib/cmake/Tessera/TesseraConfig.cmake, ...ConfigVersion.cmake, ...Targets.cmake
#                                                   find_package(Tessera) -> Tessera::tessera
#   <prefix>/lib/pkgconfig/tessera.pc               pkg-config --cflags --libs tessera
# Both carry the usage requirements: MPI, parallel HDF5, ScaLAPACK, LAPACK/OpenBLAS, libinih, jansson,
# pthreads, libm. Every path is relative to the prefix, so `cmake --install --prefix` and moved
# installations work.
include(CMakePackageConfigHelpers)

install(TARGETS tessera EXPORT TesseraTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Headers keep their paths below src/ and the project root ("core/status.h", "io/ckpt.h");
# headers internal to one module's sources are not installed.
set(internal_headers PATTERN "*_impl.h" EXCLUDE PATTERN "ckpt_hasher.h" EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/ ${PROJECT_SOURCE_DIR}/io
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera
        FILES_MATCHING PATTERN "*.h" ${internal_headers})

set(cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
install(EXPORT TesseraTargets NAMESPACE Tessera:: DESTINATION ${cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/TesseraConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/TesseraConfig.cmake
                              INSTALL_DESTINATION ${cmake_dir})
# 0.x releases: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TesseraConfig.cmake
              ${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
        DESTINATION ${cmake_dir})

# pkg-config: the dependencies by their pkg-config names (Debian's by default; other sites set
# TESS_PKGCONFIG_REQUIRES to their module names, e.g. "mpich hdf5 scalapack openblas inih jansson").
set(TESS_PKGCONFIG_REQUIRES "ompi-c hdf5-openmpi scalapack-openmpi lapack openblas inih jansson"
    CACHE STRING "pkg-config modules that tessera.pc requires")
string(REPLACE " " ";" pc_modules "${TESS_PKGCONFIG_REQUIRES}")
pkg_check_modules(TESS_PC_CHECK QUIET ${pc_modules})
if(NOT TESS_PC_CHECK_FOUND)
  message(WARNING "tessera.pc requires '${TESS_PKGCONFIG_REQUIRES}' (TESS_PKGCONFIG_REQUIRES), "
                  "but pkg-config does not find all of these modules here: "
                  "pkg-config --cflags --libs tessera will fail until they are installed.")
endif()
file(RELATIVE_PATH pc_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" pc_prefix "\${pcfiledir}/${pc_prefix}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/tessera.pc.in ${PROJECT_BINARY_DIR}/tessera.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
