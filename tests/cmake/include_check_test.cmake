# Runs cmake/check_includes.cmake over the fixtures in include_check/: the good one passes,
# each bad one fails naming its violation; then a tiny project whose module includes Asio
# without declaring it fails to build. Run with cmake -DSOURCE_DIR=... -DWORK_DIR=... -P.
set(check ${SOURCE_DIR}/cmake/check_includes.cmake)
set(fixtures ${SOURCE_DIR}/tests/cmake/include_check)
set(failures "")

function(run_check dir modules third_party expect_ok expect_text)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DMODULE=api/routing -DDIR=${fixtures}/${dir}
            -DALLOWED_MODULES=${modules} -DALLOWED_THIRD_PARTY=${third_party}
            -DSTAMP=${WORK_DIR}/${dir}.stamp -P ${check}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect_ok AND NOT rc EQUAL 0)
    string(APPEND failures "${dir}: expected to pass, failed:\n${err}\n")
  elseif(NOT expect_ok AND rc EQUAL 0)
    string(APPEND failures "${dir}: expected to fail, passed\n")
  elseif(NOT expect_ok)
    string(FIND "${err}" "${expect_text}" at)
    if(at EQUAL -1)
      string(APPEND failures "${dir}: the message does not say `${expect_text}`:\n${err}\n")
    endif()
  endif()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

file(MAKE_DIRECTORY ${WORK_DIR})
run_check(good "api/jsonrpc,common" "absl" TRUE "")
run_check(undeclared_module "api/jsonrpc,common" "" FALSE "may not include api/net/http_server.h")
run_check(undeclared_family "common" "" FALSE "may not include boost/asio/io_context.hpp (asio)")
run_check(unknown_family "common" "" FALSE "curl/curl.h is of no known include family")
run_check(dotdot "common" "" FALSE "no `..` in an include")
run_check(other_internal "api/rpc" "" FALSE "api/rpc/internal/router.h is internal to api/rpc/")
run_check(unused_family "common" "fmt" FALSE "declares `fmt` but includes none of it")
# The umbrella name `api` allows every api/ submodule.
run_check(undeclared_module "api,common" "" TRUE "")

set(build ${WORK_DIR}/project)
file(REMOVE_RECURSE ${build})
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${fixtures}/project -B ${build} -G Ninja
          -DSWITCHYARD_CMAKE_DIR=${SOURCE_DIR}/cmake
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  string(APPEND failures "the fixture project did not configure:\n${out}${err}\n")
else()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${build}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${out}${err}" "may not include boost/asio/io_context.hpp (asio)" at)
  if(rc EQUAL 0)
    string(APPEND failures "the fixture project built despite its forbidden include\n")
  elseif(at EQUAL -1)
    string(APPEND failures "the fixture project failed, but not at the layering check:\n${out}${err}\n")
  endif()
endif()

if(failures)
  message(FATAL_ERROR "include check:\n${failures}")
endif()
message(STATUS "include check: every fixture behaved")
