# switchyard_module(NAME <module>            e.g. engine, or api/routing
#                   SOURCES <files...>
#                   MODULES <project modules this one may include>
#                   THIRD_PARTY <third-party include families this one may include>
#                   LIBS <link libraries its headers expose (PUBLIC)>
#                   PRIVATE_LIBS <link libraries only its sources use>)
#
# Declares the static library `switchyard_<module>` (alias `switchyard::<module>`; a `/` in
# the name becomes `_`: switchyard::api_routing) and a layering check that runs before it
# compiles: an #include that docs/architecture.md §3 does not allow for this module fails the
# build (cmake/check_includes.cmake says what is checked).
set(SWITCHYARD_INCLUDE_CHECK ${CMAKE_CURRENT_LIST_DIR}/check_includes.cmake)

function(switchyard_module)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;MODULES;THIRD_PARTY;LIBS;PRIVATE_LIBS" ${ARGN})
  string(REPLACE "/" "_" id ${ARG_NAME})
  set(target switchyard_${id})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(switchyard::${id} ALIAS ${target})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${target} PUBLIC ${ARG_LIBS} PRIVATE ${ARG_PRIVATE_LIBS})

  file(GLOB_RECURSE module_files CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/*.h ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${id}.includes.stamp)
  string(REPLACE ";" "," modules "${ARG_NAME};${ARG_MODULES}")
  string(REPLACE ";" "," third_party "${ARG_THIRD_PARTY}")
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DMODULE=${ARG_NAME} -DDIR=${CMAKE_CURRENT_SOURCE_DIR}
            -DALLOWED_MODULES=${modules} -DALLOWED_THIRD_PARTY=${third_party}
            -DSTAMP=${stamp} -P ${SWITCHYARD_INCLUDE_CHECK}
    DEPENDS ${module_files} ${SWITCHYARD_INCLUDE_CHECK}
    COMMENT "Checking the include layering of ${ARG_NAME}/")
  add_custom_target(${target}_layering DEPENDS ${stamp})
  add_dependencies(${target} ${target}_layering)
endfunction()
