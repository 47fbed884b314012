// The translation unit that builds the precompiled header every GoogleTest
// target reuses (CMakeLists.txt, hpod_test): gtest, gmock, nlohmann/json and
// spdlog parsed once instead of in each of ~80 test files (~4.5 s each on
// CI's cores). Nothing else lives here.
