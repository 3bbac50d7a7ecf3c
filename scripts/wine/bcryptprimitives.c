/*
 * A stand-in for Windows' bcryptprimitives.dll, only for running the Windows build of the
 * CLI under Debian's wine 8 (scripts/release-check.sh): Rust's standard library calls
 * ProcessPrng, which Windows 10 and later have and wine 8 does not. Placed beside the exe,
 * it answers from RtlGenRandom. Not shipped.
 */
#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG n = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!RtlGenRandom(data, n))
            return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
