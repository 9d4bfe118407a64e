// gRPC and the generated etcd API, for the etcd backend's files. Internal to the etcd backend.
//
// Abseil (under gRPC) defines GUARDED_BY and the other unprefixed thread-safety macros too:
// simba's come first here, so that Abseil's, in a system header, quietly take their place
// (with the same meaning). Include this instead of <grpcpp/...> or "etcd_api.*.pb.h".
#pragma once

// clang-format off
#include "base/thread_annotations.h"
#include <grpcpp/grpcpp.h>
#include "etcd_api.grpc.pb.h"
#include "etcd_api.pb.h"
// clang-format on
