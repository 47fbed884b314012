#include "hpod/cli/jmespath.h"

#include <gtest/gtest.h>

#include "hpod/cli/test_json.h"

namespace hpod::cli {
namespace {

using testing::SameJson;

using Json = nlohmann::ordered_json;

// Expressions and results produced by the reference implementation (jmespath.py,
// as bundled with awscli) on the data below, by testdata/jmespath_cases.py; rerun
// it when the subset grows.
constexpr char kReferenceCases[] = R"json({
 "data": {
  "ClusterSummaries": [
   {
    "ClusterArn": "arn:c1",
    "ClusterName": "c1",
    "ClusterStatus": "InService",
    "Count": 3,
    "Tags": [
     "a",
     "b"
    ]
   },
   {
    "ClusterArn": "arn:c2",
    "ClusterName": "c2",
    "ClusterStatus": "Creating",
    "Count": 1,
    "Tags": []
   },
   {
    "ClusterArn": "arn:c3",
    "ClusterName": "c3",
    "ClusterStatus": "Failed",
    "Count": 0,
    "Tags": [
     "c"
    ],
    "Nested": {
     "x": [
      1,
      [
       2,
       3
      ]
     ]
    }
   }
  ],
  "NextToken": null,
  "Flag": false,
  "Empty": "",
  "Obj": {
   "b": 1,
   "a": 2
  },
  "Matrix": [
   [
    1,
    2
   ],
   [
    3,
    [
     4,
     5
    ]
   ],
   6
  ]
 },
 "cases": [
  [
   "ClusterSummaries[0].ClusterName",
   "c1"
  ],
  [
   "ClusterSummaries[-1].ClusterName",
   "c3"
  ],
  [
   "ClusterSummaries[5]",
   null
  ],
  [
   "ClusterSummaries[*].ClusterName",
   [
    "c1",
    "c2",
    "c3"
   ]
  ],
  [
   "ClusterSummaries[].ClusterName",
   [
    "c1",
    "c2",
    "c3"
   ]
  ],
  [
   "ClusterSummaries[].Tags[]",
   [
    "a",
    "b",
    "c"
   ]
  ],
  [
   "ClusterSummaries[].Tags",
   [
    [
     "a",
     "b"
    ],
    [],
    [
     "c"
    ]
   ]
  ],
  [
   "ClusterSummaries[*].Tags[0]",
   [
    "a",
    "c"
   ]
  ],
  [
   "ClusterSummaries[].[ClusterName, ClusterStatus]",
   [
    [
     "c1",
     "InService"
    ],
    [
     "c2",
     "Creating"
    ],
    [
     "c3",
     "Failed"
    ]
   ]
  ],
  [
   "ClusterSummaries[].{n: ClusterName, s: ClusterStatus}",
   [
    {
     "n": "c1",
     "s": "InService"
    },
    {
     "n": "c2",
     "s": "Creating"
    },
    {
     "n": "c3",
     "s": "Failed"
    }
   ]
  ],
  [
   "ClusterSummaries[?ClusterStatus=='InService'].ClusterName",
   [
    "c1"
   ]
  ],
  [
   "ClusterSummaries[?Count > `0`].ClusterName",
   [
    "c1",
    "c2"
   ]
  ],
  [
   "ClusterSummaries[?Count >= `1` && ClusterStatus != 'Failed'].ClusterArn",
   [
    "arn:c1",
    "arn:c2"
   ]
  ],
  [
   "ClusterSummaries[?!Tags].ClusterName",
   [
    "c2"
   ]
  ],
  [
   "ClusterSummaries[?Nested].Nested.x[]",
   [
    1,
    [
     2,
     3
    ]
   ]
  ],
  [
   "Obj.*",
   [
    1,
    2
   ]
  ],
  [
   "*.b",
   [
    1
   ]
  ],
  [
   "Matrix[]",
   [
    1,
    2,
    3,
    [
     4,
     5
    ],
    6
   ]
  ],
  [
   "Matrix[][]",
   [
    1,
    2,
    3,
    4,
    5,
    6
   ]
  ],
  [
   "Matrix[1][1][0]",
   4
  ],
  [
   "ClusterSummaries[0:2].ClusterName",
   [
    "c1",
    "c2"
   ]
  ],
  [
   "ClusterSummaries[::-1].ClusterName",
   [
    "c3",
    "c2",
    "c1"
   ]
  ],
  [
   "ClusterSummaries[1:].Count",
   [
    1,
    0
   ]
  ],
  [
   "ClusterSummaries | [0]",
   {
    "ClusterArn": "arn:c1",
    "ClusterName": "c1",
    "ClusterStatus": "InService",
    "Count": 3,
    "Tags": [
     "a",
     "b"
    ]
   }
  ],
  [
   "ClusterSummaries[].ClusterName | [1]",
   "c2"
  ],
  [
   "NextToken || 'none'",
   "none"
  ],
  [
   "Flag && 'x'",
   false
  ],
  [
   "Empty || Obj.a",
   2
  ],
  [
   "@.Obj.b",
   1
  ],
  [
   "`[1, 2]`",
   [
    1,
    2
   ]
  ],
  [
   "'raw'",
   "raw"
  ],
  [
   "Missing.Deep.Path",
   null
  ],
  [
   "ClusterSummaries[].Missing",
   []
  ],
  [
   "[ClusterSummaries[0].Count, Obj.a]",
   [
    3,
    2
   ]
  ],
  [
   "ClusterSummaries[?ClusterName > 'c1'].ClusterName",
   [
    "c2",
    "c3"
   ]
  ],
  [
   "ClusterSummaries[*].Nested.x",
   [
    [
     1,
     [
      2,
      3
     ]
    ]
   ]
  ],
  [
   "Obj.\"a\"",
   2
  ],
  [
   "length_is_not_a_field",
   null
  ],
  [
   "ClusterSummaries[].Count[]",
   [
    3,
    1,
    0
   ]
  ],
  [
   "ClusterSummaries[?Count==`3`] | [0].ClusterName",
   "c1"
  ],
  [
   "Matrix[*][0]",
   [
    1,
    3
   ]
  ],
  [
   "Obj.[a, b]",
   [
    2,
    1
   ]
  ],
  [
   "ClusterSummaries[].Tags[?@ == 'a']",
   [
    [
     "a"
    ],
    [],
    []
   ]
  ],
  [
   "!Flag",
   true
  ],
  [
   "Obj.a == `2`",
   true
  ],
  [
   "ClusterSummaries[0].Count < `10`",
   true
  ],
  [
   "`true` == `1`",
   false
  ]
 ]
})json";

TEST(JmespathTest, MatchesReferenceImplementation) {
  Json fixture = Json::parse(kReferenceCases);
  const Json& data = fixture["data"];
  ASSERT_GT(fixture["cases"].size(), 40u);
  for (const auto& c : fixture["cases"]) {
    const std::string expr = c[0].get<std::string>();
    StatusOr<Expression> e = Expression::Compile(expr);
    ASSERT_TRUE(e.ok()) << expr << ": " << e.status().ToString();
    Json got = e->Search(data);
    EXPECT_TRUE(SameJson(got, c[1]))
        << expr << "\n got:  " << got.dump() << "\n want: " << c[1].dump();
  }
}

TEST(JmespathTest, KeepsObjectKeyOrder) {
  Json data = Json::parse(R"({"z": 1, "a": {"y": 2, "b": 3}})");
  StatusOr<Expression> e = Expression::Compile("{z: z, y: a.y, b: a.b}");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->Search(data).dump(), R"({"z":1,"y":2,"b":3})");
  StatusOr<Expression> values = Expression::Compile("a.*");
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(values->Search(data).dump(), "[2,3]");
}

TEST(JmespathTest, RejectsBadExpressionsWithPosition) {
  for (const char* bad :
       {"[[", "a.", "a[?b", "a ==", "=", "a[1", "{a}", "`{\"a\"`", "\"unclosed", ""}) {
    StatusOr<Expression> e = Expression::Compile(bad);
    EXPECT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  StatusOr<Expression> e = Expression::Compile("a.[b");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("Incomplete expression"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("^"), std::string::npos);
}

TEST(JmespathTest, LegacyUnquotedLiteralIsAString) {
  // jmespath.py's deprecated fallback: `{` is the string "{".
  StatusOr<Expression> e = Expression::Compile("`{`");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->Search(Json::object()), "{");
}

TEST(JmespathTest, FunctionsAreOutsideTheSubset) {
  StatusOr<Expression> e = Expression::Compile("length(ClusterSummaries)");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("not supported"), std::string::npos);
  EXPECT_FALSE(Expression::Compile("sort_by(a, &b)").ok());
}

}  // namespace
}  // namespace hpod::cli
