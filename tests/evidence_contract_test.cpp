// The contract between the feature extractor and the skill library: every feature
// the extractor emits is a name the decision policy knows, and the policy decides
// on real extracted features deterministically.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "features/feature_extractor.hpp"
#include "policy/decision_policy.hpp"
#include "policy/evidence_names.hpp"
#include "policy/skill_library.hpp"

using namespace ks;

TEST_CASE("extracted features are all known to the decision policy", "[contract]") {
  auto lib = load_skill_library(std::string(KS_SOURCE_DIR) + "/skills");
  REQUIRE(lib);
  int kernels = 0;
  for (auto& f : std::filesystem::directory_iterator(std::string(KS_SOURCE_DIR) + "/tests/data/kernels")) {
    if (f.path().extension() != ".cu") continue;
    ++kernels;
    std::ifstream file(f.path());
    std::stringstream src;
    src << file.rdbuf();
    feature_input fi;
    fi.source = src.str();
    auto features = extract_features(fi);
    INFO(f.path().filename().string());
    for (auto& [name, value] : features.values) {
      const evidence_name* known = find_evidence_name(name);
      INFO(name);
      REQUIRE(known != nullptr);
      CHECK(known->kind == evidence_kind::feature);
    }
    CHECK(std::find(structure_classes().begin(), structure_classes().end(), features.structure_class) !=
          structure_classes().end());
    policy_input in;
    in.features = features;
    in.profile.values = {{"dram_throughput_pct", 75}, {"sm_throughput_pct", 20}};
    auto a = render_trace(decide(*lib, in));
    auto b = render_trace(decide(*lib, in));
    CHECK(a == b);
  }
  CHECK(kernels >= 30);
}
