#pragma once

// The fixture of the serve configuration tests: a configuration written to a file of its own
// and loaded as `switchyard serve` loads it.

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "app/config.h"
#include "tests/support/temp_dir.h"

namespace switchyard {

class ServeConfigTest : public ::testing::Test {
 protected:
  absl::StatusOr<Config> Load(const std::string& text) {
    const std::string path = dir_.Sub("serve.toml");
    std::ofstream(path) << text;
    return LoadConfig(path);
  }
  std::string Error(const std::string& text) {
    absl::StatusOr<Config> config = Load(text);
    EXPECT_FALSE(config.ok());
    return config.ok() ? "" : std::string(config.status().message());
  }

  testing::TempDir dir_;
};

constexpr char kBase[] = "[upstreams.base]\nendpoints = [{url = \"http://127.0.0.1:7799\"}]\n";

}  // namespace switchyard
