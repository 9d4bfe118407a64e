// simba-tck: runs the conformance kit against one backend.
//   simba-tck --backend URI [GoogleTest flags...]
#include "kit.h"

int main(int argc, char** argv) { return simba::tck::run_kit(argc, argv); }
