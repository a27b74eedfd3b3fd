// A group of ranks on one node sharing a control segment, and its collectives.
// Phase barriers and collectives are in group.cpp, its all_reduce algorithms in allreduce.cpp
// and the liveness protocol in liveness.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "arena.h"
#include "status.h"
#include "types.h"
#include "worker.h"

namespace gt {

// This process's arena plus the mapped arenas of the other ranks on the node.
class Group;

class Node {
 public:
  Node(const std::string& prefix, int rank, size_t arena_bytes);
  // Map the arena of `rank` (same node), once: by the path of its open file (/proc/<pid>/fd/<fd>;
  // arenas have no name), or by its name when path is empty.
  void map_peer(int rank, const std::string& path = "");
  char* base_of(int rank) const;
  // The status of `rank` (this rank or a mapped peer), or nullptr when it is not mapped here.
  RankStatus* status(int rank) const { return reinterpret_cast<RankStatus*>(base_of(rank)); }
  // Peers waiting for this rank learn that it will not come: its script ended (`how`).
  void mark_finished(const std::string& how);
  // This rank raised (in a collective, or outside one) and goes on: peers waiting for it now fail
  // at once with `what` (until this rank starts its next wait).
  void give_up(const std::string& what);
  std::vector<int> known_ranks() const;  // this rank and the peers mapped here, ascending
  // Groups of this rank by key, so a peer's wait on this rank can be checked against its phase.
  void add_group(uint64_t key, Group* group);
  void remove_group(uint64_t key);
  // This rank's published phase (posts: its post count) in the group `key`, or -1 when it has no such group.
  int64_t phase_in(uint64_t key, bool posts = false) const;
  // The thread making collectives: true when it is the only one that ever waited in one.
  bool sole_program_thread();
  Arena& arena() { return *arena_; }
  const std::string& prefix() const { return prefix_; }
  int rank() const { return rank_; }
  static std::string arena_name(const std::string& prefix, int rank);

 private:
  std::string prefix_;
  int rank_;
  size_t arena_bytes_;
  std::unique_ptr<Arena> arena_;
  std::map<int, std::unique_ptr<Mapping>> peers_;
  mutable std::mutex groups_mu_;
  std::map<uint64_t, Group*> groups_;
  std::atomic<size_t> program_thread_{0};
};

struct GroupOptions {
  double timeout_s = 300.0;
  size_t stage_bytes = size_t(1) << 20;   // per rank, per slot
  size_t oneshot_bytes = size_t(256) << 10;  // all_reduce at most this large: one phase, from staging
  size_t nontemporal_bytes = size_t(8) << 20;  // stream stores when an output is this large
  // An input in an arena at most this large is staged all the same: one small copy instead of
  // the phase after the op that keeps its owner from writing it while peers still read it.
  size_t stage_arena_bytes = size_t(8) << 10;
  // all_to_all reads a private input of at least this many bytes (under nontemporal_bytes: above, the
  // staged copies' streaming stores win) by cross-memory attach where every member can (one copy,
  // no staging phase per chunk; GLOBALTENSOR_CMA_BYTES).
  size_t cma_bytes = size_t(256) << 10;
  // all_gather / all_to_all: a private input of at least this many bytes is left unstaged when this
  // rank's output is in its arena, for its owner to copy into every member's output (push.cpp;
  // GLOBALTENSOR_PUSH_BYTES).
  size_t push_bytes = size_t(64) << 10;
  // How long a wait spins before it yields, when the group has no more members than this process
  // may run on CPUs (more members: a short spin, then yield, so a peer gets the CPU).
  double spin_s = 50e-6;
  double deadlock_s = 2.0;  // a cycle of waits stable this long is a deadlock; 0: never say so
};

// What one rank publishes for one collective.
struct Desc {
  uint32_t op;
  int32_t dtype;
  int32_t redop;
  int32_t root;
  uint64_t in_bytes;
  uint64_t out_bytes;
  int64_t in_off;   // offset of the input in the owner's arena; -1 when private memory
  int64_t out_off;
  uint32_t staged;  // the input already sits in this op's staging slot
  uint32_t cma;     // the one-time probe (cma.cpp): this rank can read and write its peers' memory
  uint64_t in_addr;   // the buffers' addresses in the owner's process, for cross-memory attach
  uint64_t out_addr;
  uint64_t probe_addr;  // a byte every peer may read by cross-memory attach (the probe's target)
  uint64_t trial_ns[2];  // all_reduce: this rank's best attached / staged trial of this size class (cma.cpp)
  uint64_t call;      // how many collectives this rank has started in the group, this one included
  uint64_t posts;     // a digest of the posted broadcasts this rank has made or read (broadcast.cpp)
};

class Group {
 public:
  // `index` is this rank's position in `ranks` (global ranks, all on this node).
  Group(std::shared_ptr<Node> node, const std::string& name, std::vector<int> ranks, int index,
        GroupOptions options);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  void barrier();
  // A small broadcast is posted (broadcast.cpp): the root returns once its message is written; a large
  // one, and transfer() (send/recv: a rendezvous, so crossed sends raise at once), meet at phases.
  void broadcast(void* buf, size_t nbytes, int root_index);
  void transfer(void* buf, size_t nbytes, int root_index);
  // Whether broadcast(nbytes, root) returns without waiting (posted, its slot free or its message
  // there, no queued op): the binding then keeps the GIL.
  bool broadcast_now(size_t nbytes, int root) const;
  void all_gather(const void* in, size_t in_bytes, void* out, size_t out_bytes);
  void reduce_scatter(const void* in, size_t in_count, void* out, size_t out_count, int32_t dtype,
                      int32_t redop);
  void all_reduce(const void* in, void* out, size_t count, int32_t dtype, int32_t redop);
  // all_reduce on this group's worker thread; the buffers must live until the Work is done.
  // Every blocking op first waits for queued ones, so all ranks keep one order of collectives.
  std::shared_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, int32_t dtype, int32_t redop);
  // all_gather on this group's worker thread (fully_shard's prefetch of the next unit); as above.
  std::shared_ptr<Work> all_gather_async(const void* in, size_t in_bytes, void* out, size_t out_bytes);
  void drain();
  // send_bytes[q]: bytes for group member q, laid out back to back in `in`; likewise recv.
  void all_to_all(const void* in, const uint64_t* send_bytes, void* out, const uint64_t* recv_bytes);

  int size() const { return k_; }
  uint64_t pushed() const { return pushed_; }  // calls written straight into the members' outputs (push.cpp)
  uint64_t key() const { return key_; }
  uint32_t my_phase() const;
  uint32_t my_posts() const;  // the posted broadcasts this member has made (broadcast.cpp)
  int index() const { return me_; }
  const std::vector<int>& ranks() const { return ranks_; }
  void set_timeout(double seconds) { opts_.timeout_s = seconds; }
  double timeout() const { return opts_.timeout_s; }

 private:
  struct Slot;
  Slot& slot(int p) const;
  Desc& desc(int p) const;
  uint64_t* counts(int p, int which, uint64_t seq) const;  // which: 0 send row, 1 recv row
  char* stage(int p, uint64_t slot_seq) const;
  const char* source(int p, uint64_t pre_slot) const;  // staged or arena input of member p

  void start(uint32_t op);  // every collective's first step: queued ops drained, the group usable, counted
  void begin(uint32_t op, Desc d, const void* prestage, size_t prestage_bytes);
  void sync();
  void broadcast_phased(void* buf, size_t nbytes, int root);
  // Posted small broadcasts (broadcast.cpp): the root copies its message into the next of its own
  // slots, numbers it and goes on; readers copy it once the number appears and acknowledge; a root
  // waits only to reuse a slot that some reader has not acknowledged.
  struct PostWord;
  PostWord& post_word(int p) const;
  PostWord& ack_word(int p, int q) const;  // how many of member p's posts member q has read
  char* post_slot(int p, uint32_t seq) const;
  bool posted(int p, uint32_t seq) const;        // member p's post number seq is there
  bool acknowledged(int q, uint32_t seq) const;  // member q has read this member's post number seq
  void post(const void* data, size_t nbytes, int root);
  const char* await_post(int p, size_t nbytes);  // the payload of p's next post, its header checked
  void ack_post(int p);
  // Every 0.2 s of any wait (for `word` to reach `target`): a member that posted a broadcast this
  // rank has not read (beyond the one it awaits from `awaited`, or -1) called a collective this rank
  // did not, unless the wait has ended meanwhile: fail naming it.
  void check_posts(int awaited, const std::atomic<uint32_t>& word, uint32_t target);
  // The liveness protocol (liveness.cpp): waiting for a member's phase while checking that it
  // lives, has not finished or given up, and is not in a cycle of waits; the errors that say so.
  void wait_for(int p, uint32_t target);
  // The same wait on any word of member p: its phase, its post word, or its acknowledgement of this
  // rank's posts; on the last two, p going on to a later phase, or awaiting a post itself in this
  // call, means the ranks called different collectives (or named different roots).
  enum class Word { phase, post, ack };
  void wait_on(int p, std::atomic<uint32_t>& word, std::atomic<uint32_t>& waiters, uint32_t target, Word kind);
  void check_post_wait(int p, const std::atomic<uint32_t>& word, uint32_t target);
  [[noreturn]] void fail_post_wait(int p, bool timed_out, const std::string& state);
  [[noreturn]] void fail_waiting(uint32_t target, bool timed_out);
  void check_peers(int p, uint32_t target);  // every 0.2 s of waiting for member p
  void check_cycle(int p);                    // ranks waiting for each other in other collectives
  // The group broken, peers told this rank gave up, then CollectiveTimeout (timed_out) or CollectiveError.
  [[noreturn]] void fail(const std::string& what, bool timed_out = false);
  std::string peer_state(int rank, uint32_t target) const;
  static bool gave_up(const RankStatus* st);  // it raised in a wait and has not waited since
  void publish_failure(const std::string& what);
  void check_all(bool ok, const char* what);  // a literal: no string is built unless it fails
  [[noreturn]] void fail_all(const char* what);  // as check_all, and the group is broken (counts out of step)
  std::string calls_text(const char* what) const;
  std::string describe(int p) const;
  std::vector<int> all_members() const;
  std::string ranks_text(const std::vector<int>& members) const;
  // all_reduce's algorithms (allreduce.cpp), once every descriptor is validated.
  void all_reduce_in_arenas(size_t count, int32_t dtype, int32_t redop, bool out_of_place);
  void all_reduce_one_shot(const void* in, void* out, size_t count, int32_t dtype, int32_t redop, bool all_staged);
  void all_reduce_whole_chunks(const void* in, void* out, size_t count, int32_t dtype, int32_t redop);
  void all_reduce_shared_chunks(const void* in, void* out, size_t count, int32_t dtype, int32_t redop);
  // Private buffers by cross-memory attach (cma.cpp): whether every member can (probed once per
  // group, with one extra phase, alike on every rank), all_reduce's algorithm, and n bytes at
  // `offset` of member p's input into dst (from its staging slot or arena, else attached).
  bool cma_agreed();
  void all_reduce_cma(const void* in, void* out, size_t count, int32_t dtype, int32_t redop);
  void read_input(int p, size_t offset, char* dst, size_t n, bool nt);
  // all_reduce of private buffers: attached or staged, for the size class of nbytes, each tried at the
  // group's first calls of that class and then chosen from every member's times (alike everywhere)
  static int trial_class(size_t nbytes) { return nbytes < (size_t(1) << 20) ? 0 : nbytes < (size_t(8) << 20) ? 1 : 2; }
  bool attach_all_reduce(int cls);
  void all_reduce_private(const void* in, void* out, size_t count, int32_t dtype, int32_t redop);
  // Private inputs copied by their owner into every member's output (push.cpp): this rank's output's
  // offset in its arena, or -1 when it is not there or overlaps the input; whether this rank leaves its
  // input unstaged for that; whether every member's output is in its arena; member p's output here.
  int64_t shared_output(const void* out, size_t out_bytes, const void* in, size_t in_bytes) const;
  bool push_wanted(const Desc& d) const;
  bool all_outputs_shared() const;
  char* output_of(int p, void* own) const;
  void all_gather_push(const void* in, size_t in_bytes, void* out, const size_t* displ, bool nt);
  void all_to_all_push(const void* in, const uint64_t* send_bytes, void* out, bool nt);
  bool attach_inputs();  // every private input left in place is under opts_.nontemporal_bytes, and attachable
  bool all_direct() const;
  bool any_arena_source() const;
  // Whether this rank stages an input of `nbytes` (at `in_off` in its arena, or -1) before the phase;
  // `attachable`: the op reads private inputs by cross-memory attach (read_input), so a private input
  // from opts_.cma_bytes is left where it is unless the group's members cannot attach.
  bool prestaged(int64_t in_off, size_t nbytes, bool attachable = false) const {
    if (in_off < 0 && attachable && nbytes >= opts_.cma_bytes && nbytes < opts_.nontemporal_bytes && cma_state_ != 0)
      return false;
    return nbytes <= opts_.stage_bytes && (in_off < 0 || nbytes <= opts_.stage_arena_bytes);
  }
  int64_t own_offset(const void* ptr, size_t nbytes) const;

  std::shared_ptr<Node> node_;
  uint64_t key_;  // a hash of the segment's name: the same on every member
  std::unique_ptr<Mapping> segment_;
  std::vector<int> ranks_;
  std::vector<char*> bases_;
  int me_;
  int k_;
  GroupOptions opts_;
  size_t slot_stride_;
  size_t counts_offset_;
  size_t stage_offset_;
  double spin_s_ = 0;  // opts_.spin_s, or 0 with more members than CPUs
  int spin_reloads_ = 4000;  // reloads of a peer's phase before the timed spin or the yields
  uint32_t phase_ = 0;
  uint64_t op_seq_ = 0;
  uint64_t stage_seq_ = 0;
  uint64_t pre_slot_ = 0;
  uint64_t calls_ = 0;             // collectives started here: the same count on every member
  std::vector<uint32_t> posts_;    // posts made by each member so far, as this member counts them
  uint64_t posts_digest_ = 0;      // a digest of posts_ (Desc::posts): ranks out of step differ
  size_t post_offset_ = 0;         // the post and acknowledgement words, then the post slots
  const char* op_name_ = "";
  double op_start_ = 0;
  double next_liveness_check_ = 0;
  std::string doing_;                            // "<op> on ranks [...]", for the status page
  std::vector<std::pair<int, uint64_t>> cycle_;  // the last cycle of waits seen: (rank, epoch)
  double cycle_since_ = 0;
  uint64_t pushed_ = 0;
  int cma_state_ = -1;         // cross-memory attach between all members: -1 not probed yet, 0 no, 1 yes
  struct AttachTrial {
    int chosen = -1;         // -1 still trying, 0 staged, 1 attached
    uint32_t done = 0;       // trials run (attached and staged in turn)
    uint64_t ns[2] = {0, 0};  // this rank's best timed trial: attached, staged
  };
  AttachTrial trials_[3];     // per trial_class
  std::vector<char> cma_tmp_;  // peers' chunks read by cross-memory attach (bounded: k - 1 chunks)
  bool broken_ = false;
  std::string broken_reason_;
  std::unique_ptr<Worker> worker_;  // made on the first asynchronous op; declared last, so joined first
};

}  // namespace gt
