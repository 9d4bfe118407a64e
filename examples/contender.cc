// Contender callbacks and an observer: leader election with full control.
#include <simba/simba.h>

#include <iostream>
#include <thread>

// [leader]
class Leader : public simba::ContenderBase {
 public:
  using ContenderBase::ContenderBase;
  void on_acquired(const simba::MutexState& state) override {
    std::cout << contender_id() << " leads (token " << state.after.fencing_token << ")\n";
  }
  void on_released(const simba::MutexState&) override { std::cout << contender_id() << " no longer leads\n"; }
};
// [leader]

int main() {
  simba::Client client = simba::connect("memory:?ttl=2s&transition=1s");

  // [election]
  auto observer = client.retrieval_service(simba::make_retriever("election", [](const simba::MutexState& state) {
    if (state.changed()) std::cout << "observer: owner is now '" << state.after.owner_id << "'\n";
  }));
  observer->start();

  auto service = client.contend_service(std::make_shared<Leader>("election"));
  service->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::cout << "is owner: " << service->is_owner() << "\n";
  service->stop();  // releases; on_released has run when stop() returns
  observer->stop();
  // [election]
}
