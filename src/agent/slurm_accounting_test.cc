#include "hpod/agent/slurm_accounting.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hpod::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SlurmAccountingTest, SlurmdbdConfUsesMariadbAsRootWithoutAPassword) {
  const std::string conf = RenderSlurmdbdConf("ip-10-1-0-5", "/var/log", "/run");
  EXPECT_THAT(conf, HasSubstr("DbdHost=ip-10-1-0-5\n"));
  EXPECT_THAT(conf, HasSubstr("StorageType=accounting_storage/mysql\n"));
  EXPECT_THAT(conf, HasSubstr("StorageHost=localhost\nStorageUser=root\n"));
  EXPECT_THAT(conf, HasSubstr("StorageLoc=slurm_acct_db\n"));
  EXPECT_THAT(conf, HasSubstr("LogFile=/var/log/slurm/slurmdbd.log\n"));
  EXPECT_THAT(conf, ::testing::Not(HasSubstr("StoragePass")));
}

TEST(SlurmAccountingTest, MariadbListensOnItsSocketOnly) {
  AccountingOptions o;
  EXPECT_THAT(MariadbdArgv(o),
              ElementsAre("/usr/sbin/mariadbd", "--user=mysql", "--datadir=/var/lib/hpod-mysql",
                          "--socket=/run/mysqld/mysqld.sock", "--pid-file=/run/mysqld/mysqld.pid",
                          "--log-error=/var/log/mysql/error.log", "--skip-networking",
                          "--innodb-log-file-size=4M", "--innodb-buffer-pool-size=32M",
                          "--innodb-autoextend-increment=4",
                          "--innodb-temp-data-file-path=ibtmp1:4M:autoextend"));
}

TEST(SlurmAccountingTest, ClusterNameOfSlurmConf) {
  EXPECT_EQ(ClusterNameOf("# x\nClusterName=demo\nSlurmctldHost=a\n"), "demo");
  EXPECT_EQ(ClusterNameOf("SlurmctldHost=a\n"), "");
}

}  // namespace
}  // namespace hpod::agent
