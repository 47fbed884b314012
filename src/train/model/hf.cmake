# HF interop: safetensors reader/writer and HF Llama directory import/export.
# Included from this folder's CMakeLists.txt (owned by the model engineer).
hpod_library(train_hf
  SRCS safetensors.cc hf.cc
  DEPS hpod_train_model hpod_base nlohmann_json::nlohmann_json)
hpod_test(train_hf_test
  SRCS safetensors_test.cc hf_test.cc
  DEPS hpod_train_hf hpod_base)
if(TARGET train_hf_test)
  # The numpy differential test runs this script with Debian's python3.
  target_compile_definitions(train_hf_test PRIVATE
    HPOD_SAFETENSORS_NP="${CMAKE_CURRENT_LIST_DIR}/../../../tests/tools/safetensors_np.py")
endif()
