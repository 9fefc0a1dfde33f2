# The reference card's SM count and threads per SM, which size the scratch
# of ATen's CUDA reductions in the model (lib/model/calibration.c), read
# from the GPU catalog: data/gpus.json is the one place they are written.
# Sets VL_REFERENCE_SM_COUNT and VL_REFERENCE_THREADS_PER_SM from the entry
# named VL_REFERENCE_GPU; a catalog without them stops the configuration.
set(VL_REFERENCE_GPU h200)
set(catalog ${CMAKE_SOURCE_DIR}/data/gpus.json)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${catalog})
file(READ ${catalog} catalog_json)
string(JSON n_gpus LENGTH "${catalog_json}" gpus)
math(EXPR last_gpu "${n_gpus} - 1")
foreach(i RANGE ${last_gpu})
  string(JSON gpu_name GET "${catalog_json}" gpus ${i} name)
  if(gpu_name STREQUAL VL_REFERENCE_GPU)
    string(JSON VL_REFERENCE_SM_COUNT ERROR_VARIABLE no_sms GET "${catalog_json}" gpus ${i} sm_count)
    string(JSON VL_REFERENCE_THREADS_PER_SM ERROR_VARIABLE no_tps
           GET "${catalog_json}" gpus ${i} max_threads_per_sm)
  endif()
endforeach()
if(NOT VL_REFERENCE_SM_COUNT MATCHES "^[1-9][0-9]*$"
   OR NOT VL_REFERENCE_THREADS_PER_SM MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "${catalog}: the '${VL_REFERENCE_GPU}' entry needs sm_count and "
                      "max_threads_per_sm (whole numbers)")
endif()
