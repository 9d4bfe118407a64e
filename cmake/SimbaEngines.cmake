# The engines of the source tree, from their manifests (src/backends/<name>/engine.env): the
# one list the build, the tests and the packaging loop over. scripts/deps.sh reads the same
# files for the Debian packages.
#
# After include():
#   SIMBA_ENGINE_NAMES                 every engine folder, in ENGINE_ORDER
#   simba_engine_value(OUT NAME KEY)   a manifest's value ("" if it has none)
#   simba_engine_of_server(OUT SERVER) the engine whose test server is SERVER ("redis", "mariadb")

set(SIMBA_ENGINES_DIR ${PROJECT_SOURCE_DIR}/src/backends)

# CONFIGURE_DEPENDS and each manifest a configure dependency: a manifest added or edited (a kit
# URI, a package) takes effect at the next build, as a CMakeLists.txt edited would.
file(GLOB simba_manifests CONFIGURE_DEPENDS RELATIVE ${SIMBA_ENGINES_DIR} ${SIMBA_ENGINES_DIR}/*/engine.env)
set(simba_ordered)
foreach(manifest ${simba_manifests})
  get_filename_component(name ${manifest} DIRECTORY)
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${SIMBA_ENGINES_DIR}/${manifest})
  file(STRINGS ${SIMBA_ENGINES_DIR}/${manifest} lines)
  set(order "")
  foreach(line ${lines})
    # KEY="value"  # comment   (a value has no double quote; shell syntax, nothing else)
    if(line MATCHES "^([A-Z_]+)=\"([^\"]*)\"[ \t]*(#.*)?$")
      set_property(GLOBAL PROPERTY SIMBA_ENGINE_${name}_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
      if(CMAKE_MATCH_1 STREQUAL "ENGINE_ORDER")
        set(order ${CMAKE_MATCH_2})
      endif()
    elseif(NOT line MATCHES "^[ \t]*(#.*)?$")
      message(FATAL_ERROR "simba: ${manifest}: not a KEY=\"value\" line: ${line}")
    endif()
  endforeach()
  if(NOT order MATCHES "^[0-9]+$")
    message(FATAL_ERROR "simba: ${manifest} needs ENGINE_ORDER=\"<number>\"")
  endif()
  string(LENGTH "${order}" digits)
  while(digits LESS 6)
    string(PREPEND order 0)
    math(EXPR digits "${digits} + 1")
  endwhile()
  list(APPEND simba_ordered "${order}|${name}")
endforeach()
list(SORT simba_ordered)
set(SIMBA_ENGINE_NAMES)
foreach(entry ${simba_ordered})
  string(REGEX REPLACE "^[0-9]+\\|" "" name "${entry}")
  list(APPEND SIMBA_ENGINE_NAMES ${name})
endforeach()

function(simba_engine_value out name key)
  get_property(value GLOBAL PROPERTY SIMBA_ENGINE_${name}_${key})
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

function(simba_engine_of_server out server)
  foreach(name ${SIMBA_ENGINE_NAMES})
    simba_engine_value(engine_server ${name} ENGINE_SERVER)
    if(engine_server STREQUAL server)
      set(${out} ${name} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "simba: no engine manifest names the test server '${server}'")
endfunction()
