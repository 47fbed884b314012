#include "hpod/cli/output.h"

#include <gtest/gtest.h>

namespace hpod::cli {
namespace {

using Json = nlohmann::ordered_json;

// Inputs and what awscli's own formatters (text.format_text, TableFormatter with
// colour off and the given terminal width) print for them, by
// testdata/format_cases.py. Full command outputs are checked in main_test.cc.
constexpr char kReferenceCases[] = R"json({
 "text": [
  [
   "just a string",
   "just a string\n"
  ],
  [
   [
    "a",
    "b",
    3
   ],
   "a\tb\t3\n"
  ],
  [
   {
    "b": 1,
    "a": "x",
    "c": null,
    "d": true,
    "e": 1.5
   },
   "x\t1\tNone\tTrue\t1.5\n"
  ],
  [
   {
    "L": [
     {
      "a": 1,
      "b": 2
     },
     {
      "a": 3,
      "c": {
       "z": 1
      }
     },
     {
      "b": 4
     }
    ]
   },
   "L\t1\t2\nL\t3\t\nC\t1\nL\t\t4\n"
  ],
  [
   [
    [
     1,
     2
    ],
    "x",
    [
     3,
     [
      4
     ]
    ]
   ],
   "x\n1\t2\n3\n4\n"
  ],
  [
   {
    "Outer": {
     "Inner": [
      1,
      2
     ],
     "s": "v"
    }
   },
   "OUTER\tv\nINNER\t1\nINNER\t2\n"
  ],
  [
   [],
   ""
  ],
  [
   {},
   ""
  ],
  [
   null,
   "None\n"
  ],
  [
   {
    "Items": [
     {
      "K": "v",
      "Sub": [
       {
        "x": 1
       }
      ]
     },
     {
      "K": "w"
     }
    ]
   },
   "ITEMS\tv\nSUB\t1\nITEMS\tw\n"
  ]
 ],
 "table": [
  [
   "Op",
   {
    "A": "x",
    "B": 2
   },
   80,
   "------------\n|    Op    |\n+----+-----+\n|  A |  B  |\n+----+-----+\n|  x |  2  |\n+----+-----+\n"
  ],
  [
   "Op",
   {
    "OnlyKey": "value"
   },
   80,
   "----------------------\n|         Op         |\n+----------+---------+\n|  OnlyKey |  value  |\n+----------+---------+\n"
  ],
  [
   "Op",
   [
    "a",
    "b"
   ],
   80,
   "-------\n| Op  |\n+-----+\n|  a  |\n|  b  |\n+-----+\n"
  ],
  [
   "Op",
   "scalar",
   80,
   "----\n|Op|\n+--+\n"
  ],
  [
   "Op",
   0,
   80,
   ""
  ],
  [
   "Op",
   {},
   80,
   ""
  ],
  [
   "Op",
   [],
   80,
   ""
  ],
  [
   "Op",
   [
    [
     1,
     2
    ],
    [
     3,
     4
    ]
   ],
   80,
   "------------\n|    Op    |\n+----+-----+\n|  1 |  2  |\n|  3 |  4  |\n+----+-----+\n"
  ],
  [
   "Op",
   {
    "Name": "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn",
    "Arn": "arn:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "Status": "InService"
   },
   80,
   "--------------------------------------------------------------------------------\n|                                      Op                                      |\n+--------+---------------------------------------------------------------------+\n|  Arn   |  arn:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa   |\n|  Name  |  nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn                 |\n|  Status|  InService                                                          |\n+--------+---------------------------------------------------------------------+\n"
  ],
  [
   "Op",
   {
    "Name": "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn",
    "Arn": "arn:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "Status": "InService"
   },
   200,
   "-----------------------------------------------------------------------------------------------------------------------------------------\n|                                                                  Op                                                                   |\n+-------------------------------------------------------------------+------------------------------------------------------+------------+\n|                                Arn                                |                        Name                          |  Status    |\n+-------------------------------------------------------------------+------------------------------------------------------+------------+\n|  arn:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa |  nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn  |  InService |\n+-------------------------------------------------------------------+------------------------------------------------------+------------+\n"
  ],
  [
   "Op",
   {
    "L": [
     {
      "a": 1,
      "b": "two"
     },
     {
      "a": 3,
      "c": "x"
     }
    ]
   },
   80,
   "---------------------\n|        Op         |\n+-------------------+\n||        L        ||\n|+---+-------+-----+|\n|| a |   b   |  c  ||\n|+---+-------+-----+|\n||  1|  two  |     ||\n||  3|       |  x  ||\n|+---+-------+-----+|\n"
  ],
  [
   "Op",
   {
    "L": [
     {
      "a": 1,
      "More": {
       "k": "v"
      }
     },
     {
      "a": 2
     }
    ]
   },
   80,
   "----------------\n|      Op      |\n+--------------+\n||      L     ||\n|+------------+|\n||      a     ||\n|+------------+|\n||  1         ||\n|+------------+|\n|||   More   |||\n||+----+-----+||\n|||  k |  v  |||\n||+----+-----+||\n||      L     ||\n|+------------+|\n||      a     ||\n|+------------+|\n||  2         ||\n|+------------+|\n"
  ],
  [
   "ListClusters",
   {
    "ClusterSummaries": [
     {
      "ClusterName": "c1"
     }
    ],
    "NextToken": "t"
   },
   80,
   "--------------------\n|   ListClusters   |\n+------------+-----+\n|  NextToken |  t  |\n+------------+-----+\n||ClusterSummaries||\n|+----------------+|\n||   ClusterName  ||\n|+----------------+|\n||  c1            ||\n|+----------------+|\n"
  ],
  [
   "Op",
   [
    {
     "x": 1
    },
    {
     "y": 2
    }
   ],
   40,
   "------------\n|    Op    |\n+----+-----+\n|  x |  y  |\n+----+-----+\n|  1 |     |\n|    |  2  |\n+----+-----+\n"
  ],
  [
   "Op",
   {
    "T": [
     [
      "a",
      "b"
     ],
     [
      "c",
      "d"
     ]
    ]
   },
   80,
   "--------------\n|     Op     |\n+------------+\n||     T    ||\n|+----+-----+|\n||  a |  b  ||\n||  c |  d  ||\n|+----+-----+|\n"
  ],
  [
   "Op",
   {
    "Flag": false,
    "N": null,
    "F": 1.25
   },
   80,
   "---------------------------\n|           Op            |\n+------+---------+--------+\n|   F  |  Flag   |   N    |\n+------+---------+--------+\n|  1.25|  False  |  None  |\n+------+---------+--------+\n"
  ],
  [
   "LongTitleOperationNameThatIsWide",
   {
    "a": "b"
   },
   30,
   "----------------------------------\n|LongTitleOperationNameThatIsWide|\n+---------------+----------------+\n|  a            |  b             |\n+---------------+----------------+\n"
  ]
 ]
})json";

TEST(OutputTest, TextMatchesAwscli) {
  Json fixture = Json::parse(kReferenceCases);
  for (const auto& c : fixture["text"]) {
    EXPECT_EQ(FormatText(c[0]), c[1].get<std::string>()) << c[0].dump();
  }
}

TEST(OutputTest, TableMatchesAwscli) {
  Json fixture = Json::parse(kReferenceCases);
  for (const auto& c : fixture["table"]) {
    TableOptions options;
    options.terminal_width = c[2].get<int>();
    EXPECT_EQ(FormatTable(c[0].get<std::string>(), c[1], options), c[3].get<std::string>())
        << c[1].dump() << " at width " << options.terminal_width;
  }
}

TEST(OutputTest, JsonKeepsOrderIndentsFourAndSkipsEmptyObject) {
  Json v = Json::parse(R"({"b": [1, {"z": null, "a": "\u00e9"}], "a": {}, "c": []})");
  EXPECT_EQ(FormatJson(v),
            "{\n    \"b\": [\n        1,\n        {\n            \"z\": null,\n"
            "            \"a\": \"\u00e9\"\n        }\n    ],\n    \"a\": {},\n    \"c\": []\n}\n");
  EXPECT_EQ(FormatJson(Json::object()), "");
  EXPECT_EQ(FormatJson(Json(nullptr)), "null\n");
  EXPECT_EQ(FormatJson(Json("x")), "\"x\"\n");
}

TEST(OutputTest, QueryAppliesBeforeFormatting) {
  StatusOr<Expression> q = Expression::Compile("L[].a");
  ASSERT_TRUE(q.ok());
  FormatRequest r;
  r.format = OutputFormat::kText;
  r.query = &*q;
  EXPECT_EQ(FormatResponse(r, Json::parse(R"({"L": [{"a": 1}, {"a": 2}]})")), "1\t2\n");
}

TEST(OutputTest, PaginatedTextIsPerPage) {
  PaginatedOutput p;
  p.result_keys = {"Items"};
  p.pages = {Json::parse(R"({"Items": [{"k": "a"}], "NextToken": "t"})"),
             Json::parse(R"({"Items": [{"k": "b", "x": 1}]})")};
  p.merged = Json::parse(R"({"Items": [{"k": "a"}, {"k": "b", "x": 1}]})");
  p.resume_token = "tok";
  FormatRequest r;
  r.format = OutputFormat::kText;
  // Columns are computed per page, as awscli prints page by page.
  EXPECT_EQ(FormatPaginated(r, p), "ITEMS\ta\nITEMS\tb\t1\nNEXTTOKEN\ttok\n");
  r.format = OutputFormat::kJson;
  EXPECT_EQ(FormatPaginated(r, p), FormatJson(p.merged));
}

TEST(OutputTest, ParseOutputFormat) {
  EXPECT_EQ(*ParseOutputFormat("table"), OutputFormat::kTable);
  EXPECT_FALSE(ParseOutputFormat("yaml").ok());
}

}  // namespace
}  // namespace hpod::cli
