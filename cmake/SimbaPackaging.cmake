# Install, find_package(simba), pkg-config and the .deb.
include(CMakePackageConfigHelpers)

get_property(simba_libraries GLOBAL PROPERTY SIMBA_LIBRARIES)
install(TARGETS ${simba_libraries} EXPORT simbaTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Unspecified
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers: the API and the test doubles; an engine's options header only if it was built.
install(DIRECTORY include/simba DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "*_backend.h" EXCLUDE)
get_property(engine_headers GLOBAL PROPERTY SIMBA_ENGINE_HEADERS)
install(FILES ${engine_headers} ${PROJECT_BINARY_DIR}/include/simba/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/simba)

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/simba)
install(EXPORT simbaTargets NAMESPACE simba:: DESTINATION ${config_dir})
get_property(SIMBA_CONFIG_FIND GLOBAL PROPERTY SIMBA_CONFIG_FIND)
get_property(SIMBA_ENGINES GLOBAL PROPERTY SIMBA_ENGINES_IN)
configure_package_config_file(cmake/simbaConfig.cmake.in ${PROJECT_BINARY_DIR}/simbaConfig.cmake
  INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/simbaConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
# The engines' own Find modules (simbaConfig.cmake's CONFIG_FIND lines may use them).
file(GLOB engine_find_modules ${SIMBA_ENGINES_DIR}/*/Find*.cmake)
install(FILES ${PROJECT_BINARY_DIR}/simbaConfig.cmake ${PROJECT_BINARY_DIR}/simbaConfigVersion.cmake
              ${engine_find_modules}
        DESTINATION ${config_dir})

# simba.pc: every library of the build and the engines' client libraries. With static
# libraries those are needed to link at all, so they are plain Requires/Libs (pkg-config's
# --static would also pull in libpq's own static-only dependencies, which Debian does not ship);
# with shared ones they are private.
get_property(pc_requires GLOBAL PROPERTY SIMBA_PC_REQUIRES)
get_property(pc_libs GLOBAL PROPERTY SIMBA_PC_LIBS)
get_property(engine_targets GLOBAL PROPERTY SIMBA_ENGINE_TARGETS)
set(SIMBA_PC_LIBS "-lsimba")
foreach(target ${engine_targets} simba_backend_support simba_core simba_runtime)
  string(APPEND SIMBA_PC_LIBS " -l${target}")
endforeach()
list(APPEND pc_requires spdlog)
list(JOIN pc_requires " " pc_requires)
list(JOIN pc_libs " " pc_libs)
if(BUILD_SHARED_LIBS)
  set(SIMBA_PC_REQUIRES_LINE "Requires.private: ${pc_requires}")
  set(SIMBA_PC_LIBS_PRIVATE_LINE "Libs.private: ${pc_libs}")
else()
  set(SIMBA_PC_REQUIRES_LINE "Requires: ${pc_requires}")
  string(APPEND SIMBA_PC_LIBS " ${pc_libs}")
  set(SIMBA_PC_LIBS_PRIVATE_LINE "")
endif()
# Relocatable: the prefix is found from where the .pc file is (cmake --install --prefix works).
file(RELATIVE_PATH SIMBA_PC_PREFIX_FROM_PCFILEDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(cmake/simba.pc.in ${PROJECT_BINARY_DIR}/simba.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/simba.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# cpack -G DEB: the CLI, the libraries and the headers, with dependencies from dpkg-shlibdeps
# (the client libraries the CLI and any shared library link) plus, for the headers and static
# libraries, the -dev packages a consumer compiles against.
set(CPACK_PACKAGE_NAME simba)
set(CPACK_PACKAGE_VENDOR "simba")
set(CPACK_PACKAGE_CONTACT "simba developers <simba@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# dpkg-shlibdeps finds this package's own shared libraries in the build tree.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
set(dev_depends libspdlog-dev)
foreach(engine ${SIMBA_ENGINES})  # the engines built: their manifests' build packages
  simba_engine_value(packages ${engine} ENGINE_BUILD_PACKAGES)
  separate_arguments(packages UNIX_COMMAND "${packages}")
  list(APPEND dev_depends ${packages})
endforeach()
list(JOIN dev_depends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
include(CPack)
