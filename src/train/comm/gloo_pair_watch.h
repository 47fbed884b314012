// Fails a ring collective's waits as soon as any connection of the mesh
// breaks (internal to the gloo communicator).
//
// Why: gloo fails the posted receives and the not-yet-started sends of a pair
// that breaks, but not an unbound send already in the pair's transmit queue
// (tcp/pair.cc, Pair::signalException walks that queue for bound buffers
// only). A rank whose send to a neighbour that had just been killed sat in
// that queue waited out the whole collective timeout ("could not send to rank
// 1 within 90 s", rank 1 dead 4 ms after its SIGKILL). The watch posts one
// empty receive from every peer on a slot nobody sends on. gloo fails it when
// that peer's connection breaks. That wakes the watch thread, which aborts the
// waits of the buffers the running collective registered (gloo's
// abortWaitSend/abortWaitRecv: the wait returns false, now or at its next
// call), and remembers that the mesh is broken.
//
// Thread contract: Scope and BrokenPeer() are called from the
// communicator's one calling thread; the watch thread only takes mu_. The
// destructor stops the watch thread; destroy the watch before the context.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/thread_annotations.h"

namespace hpod::train::comm {

// gloo's exception text without its source location:
// "[/build/gloo/transport/tcp/pair.cc:589] Read error ..." -> "Read error ...".
std::string GlooMessage(const std::exception& e);

class GlooPairWatch {
 public:
  // Starts watching every peer of `ctx` (connected). `slot` must be one that
  // no collective ever sends on. Throws as gloo does.
  GlooPairWatch(std::shared_ptr<gloo::rendezvous::Context> ctx, uint64_t slot);
  ~GlooPairWatch();
  GlooPairWatch(const GlooPairWatch&) = delete;
  GlooPairWatch& operator=(const GlooPairWatch&) = delete;

  // For its lifetime, a broken connection aborts the waits of `buffers`.
  // Destroy it before the buffers.
  class Scope {
   public:
    Scope(GlooPairWatch& watch, std::vector<gloo::transport::UnboundBuffer*> buffers);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    GlooPairWatch& watch_;
  };

  struct Lost {
    int rank;
    std::string detail;  // gloo's words: "Connection closed by peer [addr]:port"
  };
  // After the watch fired: a peer whose connection broke, `first` if its did
  // (the peer the caller was waiting on), else the lowest such rank. Asking
  // gloo posts a receive that stays on every sound connection, so this is for
  // a mesh that is done for. nullopt when every connection looks sound.
  std::optional<Lost> BrokenPeer(int first);

 private:
  void Run();

  const std::shared_ptr<gloo::rendezvous::Context> ctx_;
  const uint64_t slot_;
  char byte_ = 0;
  const std::unique_ptr<gloo::transport::UnboundBuffer> watch_;  // receives never complete
  Mutex mu_;
  std::vector<gloo::transport::UnboundBuffer*> active_ GUARDED_BY(mu_);
  bool broken_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hpod::train::comm
