// Scheduler: a periodic job that runs only on the leader.
#include <simba/simba.h>

#include <iostream>
#include <thread>

int main() {
  simba::Client client = simba::connect("sqlite:///tmp/simba-example.db");

  // [scheduler]
  simba::ScheduleOptions config;
  config.strategy = simba::ScheduleOptions::Strategy::fixed_rate;
  config.initial_delay = std::chrono::milliseconds(0);
  config.period = std::chrono::milliseconds(200);
  config.worker = "report";

  simba::Scheduler scheduler("nightly-report", client, config, [](std::stop_token stop) {
    if (stop.stop_requested()) return;  // leadership lost: give up promptly
    std::cout << "sending the report\n";
  });
  scheduler.start();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  scheduler.stop();  // joins the worker thread and releases the mutex
  // [scheduler]
}
