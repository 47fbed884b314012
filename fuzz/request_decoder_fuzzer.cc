// libFuzzer target: the request decoder every API byte passes through first.
// Input layout: X-Amz-Target, '\n', Content-Type, '\n', body (any bytes).
// It must return a value for every input; crashes, leaks and UB are findings.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hpod/api/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t a = in.find('\n');
  std::string_view target = in.substr(0, a);
  std::string_view rest = a == std::string_view::npos ? "" : in.substr(a + 1);
  size_t b = rest.find('\n');
  std::string_view content_type = rest.substr(0, b);
  std::string_view body = b == std::string_view::npos ? "" : rest.substr(b + 1);
  // Half the inputs go to a real operation so the validator is reached.
  if (size % 2 == 0) target = "SageMaker.CreateCluster";
  if (size % 3 == 0) content_type = "application/x-amz-json-1.1";
  auto r = hpod::api::DecodeRequest(hpod::api::ServiceModel::Get(), target, content_type, body);
  (void)r;
  return 0;
}
