// Shared-memory arena: best-fit free list with coalescing; pages kept for reuse until released.
#include "arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "types.h"

namespace gt {

namespace {

constexpr size_t kPage = 4096;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

std::string errno_text(const std::string& what, const std::string& name, int err) {
  return what + " '" + name + "': " + std::strerror(err);
}

char* map_fd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) throw std::runtime_error(errno_text("mmap of shared memory", name, errno));
  return static_cast<char*>(p);
}

// Map fd whole (bytes) and close it, also when mapping fails (the mapping keeps the file).
char* map_and_close(int fd, size_t bytes, const std::string& name) {
  try {
    char* p = map_fd(fd, bytes, name);
    close(fd);
    return p;
  } catch (...) {
    close(fd);
    throw;
  }
}

}  // namespace

Arena::Arena(const std::string& name, size_t reserve_bytes)
    : name_(name), reserve_(round_up(reserve_bytes, kPage)) {
  fd_ = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd_ < 0) throw std::runtime_error(errno_text("shm_open", name, errno));
  if (ftruncate(fd_, off_t(reserve_)) != 0) {
    int err = errno;
    close(fd_);
    shm_unlink(name.c_str());
    throw std::runtime_error(errno_text("ftruncate of shared memory", name, err));
  }
  base_ = map_fd(fd_, reserve_, name);
  int err = posix_fallocate(fd_, 0, off_t(kPage));  // page 0: the rank's status (status.h)
  if (err != 0) {
    munmap(base_, reserve_);
    close(fd_);
    shm_unlink(name.c_str());
    throw ShmExhausted("could not reserve the first page of shared memory in /dev/shm: " +
                       std::string(std::strerror(err)));
  }
  top_ = kPage;
  // no name from here on: nothing is left in /dev/shm whatever way this process ends (peers
  // open the file through /proc/<pid>/fd/<fd>, see Mapping's path constructor)
  shm_unlink(name.c_str());
  unlinked_ = true;
}

Arena::~Arena() {
  if (base_) munmap(base_, reserve_);
  if (fd_ >= 0) close(fd_);
  unlink();
}

void Arena::unlink() {
  if (!unlinked_) shm_unlink(name_.c_str());
  unlinked_ = true;
}

void Arena::insert_free(size_t off, Block b) {
  auto next = free_.lower_bound(off);
  if (next != free_.end() && off + b.size == next->first) {
    b.size += next->second.size;
    b.committed = b.committed && next->second.committed;
    b.zero = b.zero && next->second.zero;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size == off) {
      prev->second.size += b.size;
      prev->second.committed = prev->second.committed && b.committed;
      prev->second.zero = prev->second.zero && b.zero;
      return;
    }
  }
  free_.emplace(off, b);
}

int64_t Arena::alloc(size_t nbytes, bool* zeroed) {
  size_t size = round_up(nbytes == 0 ? 1 : nbytes, kPage);
  std::lock_guard<std::mutex> lock(mu_);
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)  // best fit; the list stays short
    if (it->second.size >= size && (best == free_.end() || it->second.size < best->second.size))
      best = it;
  size_t off;
  bool committed = false, zero = true;
  if (best != free_.end()) {
    off = best->first;
    Block b = best->second;
    committed = b.committed;
    zero = b.zero;
    free_.erase(best);
    if (b.size > size) free_.emplace(off + size, Block{b.size - size, b.committed, b.zero});
  } else {
    if (top_ + size > reserve_)
      throw ShmExhausted("shared-memory arena '" + name_ + "' is out of address space (" +
                         std::to_string(reserve_ >> 20) + " MiB reserved)");
    off = top_;
    top_ += size;
  }
  if (!committed) {
    int err = posix_fallocate(fd_, off_t(off), off_t(size));
    if (err != 0) {
      insert_free(off, Block{size, false, zero});
      throw ShmExhausted("could not reserve " + std::to_string(size) +
                         " bytes of shared memory in /dev/shm: " + std::strerror(err));
    }
  }
  if (zeroed) *zeroed = zero;
  used_.emplace(off, size);
  size_t now = allocated_ += size;
  if (now > peak_.load()) peak_.store(now);
  return int64_t(off);
}

void Arena::free(int64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(size_t(offset));
  if (it == used_.end()) return;
  size_t size = it->second;
  used_.erase(it);
  allocated_ -= size;
  insert_free(size_t(offset), Block{size, true, false});
}

size_t Arena::size_of(int64_t offset) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(size_t(offset));
  return it == used_.end() ? 0 : it->second;
}

void Arena::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [off, b] : free_) {
    if (!b.committed) continue;
    fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(off), off_t(b.size));
    b.committed = false;
    b.zero = true;
  }
}

int64_t Arena::offset_of(const void* ptr, size_t nbytes) const {
  auto p = static_cast<const char*>(ptr);
  if (p < base_ || p + nbytes > base_ + top_.load()) return -1;
  return int64_t(p - base_);
}

size_t Arena::used_bytes() const { return allocated_.load(); }

size_t Arena::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& kv : free_) n += kv.second.committed ? kv.second.size : 0;
  return n;
}

Mapping::Mapping(const std::string& name, size_t bytes, bool create) : name_(name), size_(bytes) {
  int fd = shm_open(name.c_str(), O_RDWR | (create ? O_CREAT : 0), 0600);
  if (fd < 0) throw std::runtime_error(errno_text("shm_open", name, errno));
  if (create) {
    struct stat st;
    if (fstat(fd, &st) == 0 && size_t(st.st_size) < bytes && ftruncate(fd, off_t(bytes)) != 0) {
      int err = errno;
      close(fd);
      throw std::runtime_error(errno_text("ftruncate of shared memory", name, err));
    }
    int err = posix_fallocate(fd, 0, off_t(bytes));
    if (err != 0) {
      close(fd);
      throw ShmExhausted("could not reserve " + std::to_string(bytes) + " bytes of shared memory for '" +
                         name + "' in /dev/shm: " + std::strerror(err));
    }
  }
  data_ = map_and_close(fd, bytes, name);
}

Mapping::Mapping(const std::string& path) : name_(path), unlinked_(true) {
  int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) throw std::runtime_error(errno_text("open of a peer's shared memory", path, errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    throw std::runtime_error(errno_text("fstat of a peer's shared memory", path, err));
  }
  size_ = size_t(st.st_size);  // the peer's own size, whatever this rank's settings say
  data_ = map_and_close(fd, size_, path);
}

Mapping::~Mapping() {
  if (data_) munmap(data_, size_);
}

void Mapping::unlink() {
  if (!unlinked_) shm_unlink(name_.c_str());
  unlinked_ = true;
}

}  // namespace gt
