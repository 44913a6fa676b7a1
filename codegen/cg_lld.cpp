// cg_lld.cpp — lld's ELF linker inside cnnc (liblld-19-dev), behind a C function: the one C++
// file of cnnc, because lld has no C API.  Linking in the process saves what running ld.lld-19
// costs each compile: loading and relocating libLLVM.so again (~0.1 s, as long as the whole
// link of a small model).  lld is not reentrant: one link at a time (a mutex); after a link
// that lld says leaves it unusable (canRunAgain false) the process links no more in-process
// and cg_lld_link returns -2, and cg_link.c runs the linker program instead.
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "lld/Common/Driver.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

LLD_HAS_DRIVER(elf)

namespace {
std::mutex lld_mutex;
bool lld_broken = false;
char fatal_msg[400];

// LLVM's fatal errors inside lld (a failed write of the output: "IO failure on output stream:
// No space left on device" from the stream's destructor) would end cnnc; they go back to
// lldMain's recovery point instead, which returns "cannot run again".
void on_fatal(void *, const char *reason, bool) {
  std::snprintf(fatal_msg, sizeof fatal_msg, "%s", reason);
  if (llvm::CrashRecoveryContext *crc = llvm::CrashRecoveryContext::GetCurrent()) crc->HandleExit(1);
}
}  // namespace

extern "C" int cg_lld_link(int argc, const char *const *argv, char *err, size_t errn) {
  std::lock_guard<std::mutex> lock(lld_mutex);
  if (errn) err[0] = 0;
  if (lld_broken) return -2;
  std::string out, msg;
  llvm::raw_string_ostream os(out), es(msg);
  // lld's fatal errors leave through the crash recovery context (a longjmp back to lldMain);
  // without it enabled they would end the process.
  fatal_msg[0] = 0;
  llvm::CrashRecoveryContext::Enable();
  llvm::install_fatal_error_handler(on_fatal, nullptr);
  lld::Result r = lld::lldMain(llvm::ArrayRef<const char *>(argv, (size_t)argc), os, es, {{lld::Gnu, &lld::elf::link}});
  llvm::remove_fatal_error_handler();
  llvm::CrashRecoveryContext::Disable();
  es.flush();
  if (!r.canRunAgain) lld_broken = true;
  if (errn) std::snprintf(err, errn, "%s", fatal_msg[0] ? fatal_msg : msg.c_str());
  return r.retCode;
}
