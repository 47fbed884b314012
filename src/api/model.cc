#include "hpod/api/model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace hpod::api {

// Defined in the generated sagemaker_cluster_model.cc and hpod_extensions_model.cc.
extern const char kSageMakerClusterModelJson[];
extern const char kHpodExtensionsModelJson[];

std::string_view ShapeTypeName(ShapeType type) {
  switch (type) {
    case ShapeType::kStructure:
      return "structure";
    case ShapeType::kList:
      return "list";
    case ShapeType::kMap:
      return "map";
    case ShapeType::kString:
      return "string";
    case ShapeType::kInteger:
      return "integer";
    case ShapeType::kLong:
      return "long";
    case ShapeType::kBoolean:
      return "boolean";
    case ShapeType::kTimestamp:
      return "timestamp";
    case ShapeType::kDouble:
      return "double";
    case ShapeType::kFloat:
      return "float";
    case ShapeType::kBlob:
      return "blob";
  }
  return "?";
}

const Member* Shape::FindMember(std::string_view name) const {
  for (const Member& m : members) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

bool Shape::IsRequired(std::string_view member_name) const {
  return std::find(required.begin(), required.end(), member_name) != required.end();
}

const Operation* ServiceModel::FindOperation(std::string_view name) const {
  auto it = operations_.find(std::string(name));
  return it == operations_.end() ? nullptr : it->second.get();
}

const Shape* ServiceModel::FindShape(std::string_view name) const {
  auto it = shapes_.find(std::string(name));
  return it == shapes_.end() ? nullptr : it->second.get();
}

struct ModelLoader {
  // The model is compiled in and checked by model_test, so a defect here is a
  // build defect: fail loudly rather than serve a partial API.
  [[noreturn]] static void Die(const std::string& what) {
    std::fprintf(stderr, "hpod: compiled-in API model is broken: %s\n", what.c_str());
    std::abort();
  }

  static ShapeType ParseType(const std::string& t) {
    static const std::pair<const char*, ShapeType> kTypes[] = {{"structure", ShapeType::kStructure},
                                                               {"list", ShapeType::kList},
                                                               {"map", ShapeType::kMap},
                                                               {"string", ShapeType::kString},
                                                               {"integer", ShapeType::kInteger},
                                                               {"long", ShapeType::kLong},
                                                               {"boolean", ShapeType::kBoolean},
                                                               {"timestamp", ShapeType::kTimestamp},
                                                               {"double", ShapeType::kDouble},
                                                               {"float", ShapeType::kFloat},
                                                               {"blob", ShapeType::kBlob}};
    for (const auto& [name, type] : kTypes) {
      if (t == name) return type;
    }
    Die("unknown shape type " + t);
  }

  static std::unique_ptr<ServiceModel> Load() {
    auto model = std::unique_ptr<ServiceModel>(new ServiceModel());
    // botocore's model plus hpod's own operations (kept in a separate file so the
    // botocore extract can be regenerated untouched).
    nlohmann::ordered_json oj = nlohmann::ordered_json::parse(kSageMakerClusterModelJson);
    const auto ext = nlohmann::ordered_json::parse(kHpodExtensionsModelJson);
    for (const auto& [name, spec] : ext.at("shapes").items()) {
      if (oj["shapes"].contains(name)) Die("extension shape " + name + " exists");
      oj["shapes"][name] = spec;
    }
    // Members hpod adds to AWS's shapes (named Hpod…, so AWS's never collide):
    // clients that know only AWS's model ignore them, as they ignore any member
    // they do not know.
    if (ext.contains("members")) {
      for (const auto& [shape, members] : ext.at("members").items()) {
        if (!oj["shapes"].contains(shape)) Die("extension members of unknown shape " + shape);
        for (const auto& [name, ref] : members.items()) {
          if (name.rfind("Hpod", 0) != 0) Die("extension member " + name + " must start with Hpod");
          if (oj["shapes"][shape]["members"].contains(name)) {
            Die("extension member " + shape + "." + name + " exists");
          }
          oj["shapes"][shape]["members"][name] = ref;
        }
      }
    }
    for (const auto& [name, spec] : ext.at("operations").items()) {
      if (oj["operations"].contains(name)) Die("extension operation " + name + " exists");
      oj["operations"][name] = spec;
    }
    nlohmann::json j = oj;
    const auto& meta = j.at("metadata");
    model->target_prefix_ = meta.at("targetPrefix");
    model->signing_name_ = meta.at("signingName");
    model->api_version_ = meta.at("apiVersion");
    model->source_ = j.value("source", "");

    // Two passes: create every shape, then link references.
    for (const auto& [name, spec] : j.at("shapes").items()) {
      auto shape = std::make_unique<Shape>();
      shape->name = name;
      shape->type = ParseType(spec.at("type"));
      model->shapes_[name] = std::move(shape);
    }
    auto ref = [&](const nlohmann::json& r) -> const Shape* {
      const Shape* s = model->FindShape(r.at("shape").get<std::string>());
      if (s == nullptr) Die("dangling shape reference " + r.dump());
      return s;
    };
    for (const auto& [name, spec] : j.at("shapes").items()) {
      Shape& shape = *model->shapes_[name];
      if (spec.contains("members")) {
        for (const auto& [mname, mspec] : spec.at("members").items()) {
          shape.members.push_back(
              Member{mname, ref(mspec), mspec.value("idempotencyToken", false)});
        }
      }
      if (spec.contains("required")) shape.required = spec.at("required");
      if (spec.contains("member")) shape.member = ref(spec.at("member"));
      if (spec.contains("key")) shape.key = ref(spec.at("key"));
      if (spec.contains("value")) shape.value = ref(spec.at("value"));
      if (spec.contains("min")) shape.min = spec.at("min").get<int64_t>();
      if (spec.contains("max")) shape.max = spec.at("max").get<int64_t>();
      if (spec.contains("pattern")) shape.pattern = spec.at("pattern");
      if (spec.contains("enum")) shape.enum_values = spec.at("enum");
      shape.is_union = spec.value("union", false);
      shape.is_exception = spec.value("exception", false);
    }
    // nlohmann::json sorts object keys; the model's member order matters for
    // output, so re-read members in file order from the ordered parse.
    for (const auto& [name, spec] : oj.at("shapes").items()) {
      if (!spec.contains("members")) continue;
      Shape& shape = *model->shapes_[name];
      std::vector<Member> ordered;
      for (const auto& [mname, mspec] : spec.at("members").items()) {
        ordered.push_back(*shape.FindMember(mname));
      }
      shape.members = std::move(ordered);
    }
    for (const auto& [name, spec] : oj.at("operations").items()) {
      auto op = std::make_unique<Operation>();
      op->name = name;
      op->input = model->FindShape(spec.at("input").get<std::string>());
      op->output = model->FindShape(spec.at("output").get<std::string>());
      if (op->input == nullptr || op->output == nullptr) Die("operation " + name);
      for (const auto& e : spec.at("errors")) {
        const Shape* s = model->FindShape(e.get<std::string>());
        if (s == nullptr) Die("error shape " + e.dump());
        op->errors.push_back(s);
      }
      if (oj.at("paginators").contains(name)) {
        const auto& p = oj.at("paginators").at(name);
        Paginator pg;
        pg.input_token = p.at("input_token");
        pg.output_token = p.at("output_token");
        pg.limit_key = p.value("limit_key", "");
        if (p.at("result_key").is_array()) {
          pg.result_keys = p.at("result_key").get<std::vector<std::string>>();
        } else {
          pg.result_keys.push_back(p.at("result_key"));
        }
        op->paginator = std::move(pg);
      }
      model->operation_order_.push_back(op.get());
      model->operations_[name] = std::move(op);
    }
    return model;
  }
};

const ServiceModel& ServiceModel::Get() {
  static const std::unique_ptr<ServiceModel> model = ModelLoader::Load();
  return *model;
}

}  // namespace hpod::api
