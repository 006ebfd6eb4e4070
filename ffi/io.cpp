// Read-only memory mapping of files (safetensors checkpoints): tensors are created from
// the mapped bytes with one copy straight to their device, and the mapping is dropped.
#include "shim.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

// out: [address, length]. An empty file maps to address 0.
VT_API int32_t vt_file_map(const char* path, double* out) {
  VT_TRY
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("cannot open ") + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(std::string("cannot stat ") + path + ": " + std::strerror(e));
  }
  void* addr = nullptr;
  if (st.st_size > 0) {
    addr = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error(std::string("cannot map ") + path + ": " + std::strerror(e));
    }
  }
  ::close(fd);
  out[0] = static_cast<double>(reinterpret_cast<uintptr_t>(addr));
  out[1] = static_cast<double>(st.st_size);
  VT_CATCH
}

VT_API int32_t vt_file_unmap(void* addr, int64_t length) {
  VT_TRY
  if (addr != nullptr && ::munmap(addr, static_cast<size_t>(length)) != 0)
    throw std::runtime_error(std::string("munmap failed: ") + std::strerror(errno));
  VT_CATCH
}
