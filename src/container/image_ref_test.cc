#include "hpod/container/image_ref.h"

#include <gtest/gtest.h>

namespace hpod::container {
namespace {

TEST(ImageRefTest, EnrootSyntaxSeparatesTheRegistryWithAHash) {
  auto r = ParseImportUri("docker://nvcr.io#nvidia/pytorch:24.01-py3");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, ImageRef::Kind::kDocker);
  EXPECT_EQ(r->registry, "nvcr.io");
  EXPECT_EQ(r->image, "nvidia/pytorch");
  EXPECT_EQ(r->tag, "24.01-py3");
  EXPECT_EQ(r->SkopeoSource(), "docker://nvcr.io/nvidia/pytorch:24.01-py3");
  EXPECT_EQ(r->ToString(), "docker://nvcr.io#nvidia/pytorch:24.01-py3");
}

TEST(ImageRefTest, DockerHubOfficialImagesUserAndPortedRegistries) {
  auto r = ParseImportUri("docker://ubuntu");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->SkopeoSource(), "docker://docker.io/library/ubuntu:latest");
  r = ParseImportUri("docker://alice@10.77.0.1:5000#hpod/train:1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->user, "alice");
  EXPECT_EQ(r->registry, "10.77.0.1:5000");
  EXPECT_EQ(r->SkopeoSource(), "docker://10.77.0.1:5000/hpod/train:1");
  r = ParseImportUri("docker://localhost:5000#a/b@sha256:" + std::string(64, 'a'));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tag, "");
  EXPECT_EQ(r->SkopeoSource(), "docker://localhost:5000/a/b@sha256:" + std::string(64, 'a'));
}

TEST(ImageRefTest, ContainerImageImpliesDockerAndTakesPaths) {
  auto r = ParseContainerImage("nvcr.io#nvidia/pytorch:24.01-py3");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, ImageRef::Kind::kDocker);
  r = ParseContainerImage("/fsx/images/train.sqsh");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, ImageRef::Kind::kSquashfs);
  EXPECT_EQ(r->path, "/fsx/images/train.sqsh");
  r = ParseContainerImage("dockerd://train:1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->SkopeoSource(), "docker-daemon:train:1");
}

TEST(ImageRefTest, MistakesAreOneLineThatSaysWhatToWrite) {
  auto r = ParseContainerImage("nvcr.io/nvidia/pytorch:24.01");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("separate it with '#'"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(ParseContainerImage("").ok());
  EXPECT_FALSE(ParseContainerImage("Ubuntu").ok());  // repositories are lowercase
  EXPECT_FALSE(ParseImportUri("ubuntu").ok());       // import wants a scheme
  EXPECT_FALSE(ParseImportUri("docker://@x#y").ok());
  EXPECT_FALSE(ParseImportUri("docker://x#y:").ok());
  EXPECT_FALSE(ParseImportUri("docker-archive:").ok());
  EXPECT_FALSE(ParseContainerImage("docker-archive:/tmp/a.tar").ok());
  auto a = ParseImportUri("oci-archive:/tmp/a.tar");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->SkopeoSource(), "oci-archive:/tmp/a.tar");
}

}  // namespace
}  // namespace hpod::container
