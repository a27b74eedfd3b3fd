// Collectives written straight into every member's arena output (all_gather, all_to_all; broadcast.cpp's shares).
//
// An input numpy did not place in the arena (a bytearray's, a memmap, one made before the job) is where
// no peer can read it: staged, each byte is copied into a slot and out of it again by every member, a
// phase per 1 MiB chunk; attached (cma.cpp), the kernel pins every 4 KiB page of it. But the outputs the
// library makes lie in the arenas, which every member maps: then the owner of each input copies it into
// every member's output itself, one plain copy a destination, and one phase after the copies says every
// output is complete. Open MPI's single copy (cross-memory attach) makes the same number of copies with
// a pinned page each. Chosen when every member's output is in its arena and apart from its input
// (Desc::out_off, -1 otherwise): every member reads the same descriptors, so all decide alike. A member
// that left its input unstaged for a push that does not come goes the staged (or attached) way. A
// broadcast whose root's message is in its arena has every member, the root too, copy its share of it
// into every reader's output.
#include <cstdint>

#include "group.h"
#include "group_segment.h"
#include "reduce.h"

namespace gt {

int64_t Group::shared_output(const void* out, size_t out_bytes, const void* in, size_t in_bytes) const {
  auto o = static_cast<const char*>(out), i = static_cast<const char*>(in);
  bool apart = o + out_bytes <= i || i + in_bytes <= o;
  return apart && out_bytes > 0 ? own_offset(out, out_bytes) : -1;
}

bool Group::push_wanted(const Desc& d) const {
  return d.in_off < 0 && d.out_off >= 0 && d.in_bytes >= opts_.push_bytes;
}

bool Group::all_outputs_shared() const {
  for (int p = 0; p < k_; ++p)
    if (desc(p).out_off < 0) return false;
  return true;
}

char* Group::output_of(int p, void* own) const {
  return p == me_ ? static_cast<char*>(own) : bases_[p] + desc(p).out_off;
}

void Group::all_gather_push(const void* in, size_t in_bytes, void* out, const size_t* displ, bool nt) {
  for (int j = 0; j < k_; ++j) {  // the next member first: the members' copies spread over the outputs
    int q = (me_ + 1 + j) % k_;
    copy_bytes(output_of(q, out) + displ[me_], in, in_bytes, nt);
  }
  ++pushed_;
  sync();  // every member's share is in every output
}

void Group::all_to_all_push(const void* in, const uint64_t* send_bytes, void* out, bool nt) {
  for (int j = 0; j < k_; ++j) {
    int q = (me_ + 1 + j) % k_;
    // this member's piece for q, to where q receives it (after the lower members' pieces)
    size_t from = prefix_bytes(send_bytes, q), at = prefix_bytes(counts(q, 1, op_seq_), me_);
    copy_bytes(output_of(q, out) + at, static_cast<const char*>(in) + from, send_bytes[q], nt);
  }
  ++pushed_;
  sync();
}

}  // namespace gt
