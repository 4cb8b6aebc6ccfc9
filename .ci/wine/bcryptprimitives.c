/* Test-only shim, used by .ci/windows to run the Windows test binaries under Wine.
 *
 * Rust's std (1.78+) imports ProcessPrng from bcryptprimitives.dll for random
 * numbers (HashMap seeds, ...). Real Windows (10 and later) has that DLL; Wine 8 does
 * not, so every Rust exe fails to start with STATUS_DLL_NOT_FOUND (c0000135). This
 * DLL is copied next to the test binaries and forwards to advapi32's
 * SystemFunction036 (RtlGenRandom). Never ship it. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
