# Fails configuration when a source under DIR includes an MLIR or LLVM
# header. cost_model/ and runtime/ must build and ship without a compiler.
function(colossal_check_no_mlir_includes dir)
  file(GLOB_RECURSE sources "${dir}/*.h" "${dir}/*.hpp" "${dir}/*.cpp" "${dir}/*.cc" "${dir}/*.cu"
       "${dir}/*.cuh")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" offending REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](mlir|llvm)/")
    if(offending)
      message(FATAL_ERROR "${source} includes MLIR/LLVM (${offending}); "
                          "cost_model/ and runtime/ must stay free of MLIR")
    endif()
  endforeach()
  # Re-run the check when files are added or changed.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${sources})
endfunction()
