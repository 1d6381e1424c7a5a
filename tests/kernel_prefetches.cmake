# Fails unless every kernel object that issues software prefetches still holds prefetch
# instructions. GCC deletes a loop that does nothing but prefetch, when the prefetch is written
# with _mm_prefetch or __builtin_prefetch, without a warning (src/kernels/prefetch.hpp): the
# gathers' prefetches were missing from the binary that way and every measurement of them timed
# nothing. Run as: cmake -DOBJDUMP=... -DOBJECTS=a.o|b.o|... -P kernel_prefetches.cmake
cmake_minimum_required(VERSION 3.20)
set(expected gather_avx2 gather_avx512vbmi interleave_avx512 interleave_avx512vbmi runs_avx512)
string(REPLACE "|" ";" objects "${OBJECTS}")
set(checked "")
foreach(object IN LISTS objects)
  get_filename_component(name "${object}" NAME)
  string(REGEX REPLACE "\\.cpp\\.o(bj)?$" "" stem "${name}")
  if(NOT stem IN_LIST expected)
    continue()
  endif()
  execute_process(COMMAND "${OBJDUMP}" -d "${object}" OUTPUT_VARIABLE listing RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "kernel_prefetches: ${OBJDUMP} -d ${object} failed with status ${status}")
  endif()
  string(REGEX MATCHALL "prefetcht[01]" found "${listing}")
  list(LENGTH found count)
  if(count EQUAL 0)
    message(SEND_ERROR "kernel_prefetches: ${name} holds no prefetch instruction; its software "
                       "prefetches were compiled away (write them with kernels/prefetch.hpp)")
  else()
    message(STATUS "${name}: ${count} prefetch instructions")
  endif()
  list(APPEND checked "${stem}")
endforeach()
foreach(stem IN LISTS expected)
  if(NOT stem IN_LIST checked)
    message(SEND_ERROR "kernel_prefetches: no object ${stem}.cpp.o among the library's objects")
  endif()
endforeach()
