/* Runs a Windows program with the environment a Windows machine gives it.
 *
 * Wine copies the whole Unix environment into the Win32 environment of the programs
 * it starts, so a Windows program under Wine sees DISPLAY, HOME, XDG_* and the like,
 * which no Windows machine has: code that reads them works under Wine and fails for
 * every Windows user. This launcher removes them from its own environment, then starts
 * the rest of its command line with that environment (inherited by everything the
 * program starts in turn), waits for it and returns its exit code. Wine's own drivers
 * read the Unix environment, which stays as it was: windows still open on the X server.
 *
 *   wine64 winenv.exe PROGRAM.exe [ARGS...]
 *
 * Test-only (.ci/wine/run); built by .ci/windows with mingw.
 */
#include <windows.h>
#include <wchar.h>

/* Unix-only variables: exact names, and prefixes (ending in '_'). */
static const wchar_t *const unix_only[] = {
    L"DISPLAY", L"WAYLAND_DISPLAY", L"WAYLAND_SOCKET", L"HOME", L"SHELL", L"TERM",
    L"PWD", L"OLDPWD", L"LOGNAME", L"USER", L"MAIL", L"SHLVL", L"_", L"XDG_",
    L"DBUS_", L"SSH_", L"LS_COLORS", L"LD_LIBRARY_PATH", NULL,
};

static int is_unix_only(const wchar_t *name, size_t len) {
    for (int i = 0; unix_only[i]; i++) {
        size_t n = wcslen(unix_only[i]);
        int prefix = n > 1 && unix_only[i][n - 1] == L'_';
        if (prefix ? (len >= n && _wcsnicmp(name, unix_only[i], n) == 0)
                   : (len == n && _wcsnicmp(name, unix_only[i], n) == 0))
            return 1;
    }
    return 0;
}

static void remove_unix_variables(void) {
    for (;;) {
        wchar_t *block = GetEnvironmentStringsW(), found[512];
        int any = 0;
        for (wchar_t *v = block; v && *v; v += wcslen(v) + 1) {
            /* Names such as "=C:" (the current directory of a drive) start with '='. */
            const wchar_t *eq = wcschr(v + 1, L'=');
            size_t len = eq ? (size_t)(eq - v) : wcslen(v);
            if (len < 512 && is_unix_only(v, len)) {
                wmemcpy(found, v, len);
                found[len] = 0;
                any = 1;
                break;
            }
        }
        FreeEnvironmentStringsW(block);
        if (!any)
            return;
        SetEnvironmentVariableW(found, NULL);
    }
}

/* The command line after this program's own name (Windows' quoting rules). */
static wchar_t *rest_of_command_line(void) {
    wchar_t *p = GetCommandLineW();
    if (*p == L'"') {
        for (p++; *p && *p != L'"'; p++) {
        }
        if (*p) p++;
    } else {
        while (*p && *p != L' ' && *p != L'\t') p++;
    }
    while (*p == L' ' || *p == L'\t') p++;
    return p;
}

static BOOL WINAPI ignore_console_event(DWORD event) {
    (void)event;
    return TRUE; /* the program gets it too and decides; this waits for the program */
}

int wmain(void) {
    wchar_t *rest = rest_of_command_line();
    if (!*rest) {
        fwprintf(stderr, L"usage: winenv.exe PROGRAM [ARGS...]\n");
        return 2;
    }
    remove_unix_variables();
    SetConsoleCtrlHandler(ignore_console_event, TRUE);
    /* CreateProcessW may write to the command line: give it a copy. */
    size_t n = wcslen(rest) + 1;
    wchar_t *line = HeapAlloc(GetProcessHeap(), 0, n * sizeof(wchar_t));
    if (!line) return 1;
    wmemcpy(line, rest, n);
    STARTUPINFOW si = {.cb = sizeof si};
    PROCESS_INFORMATION pi;
    if (!CreateProcessW(NULL, line, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
        fwprintf(stderr, L"winenv: cannot start %ls (error %lu)\n", line, GetLastError());
        return 127;
    }
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    return (int)code;
}
