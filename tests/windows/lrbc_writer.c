/*
 * An independent Windows producer for tests/windows.rs, as tests/py/lrbc_segment.py is
 * on Linux: it creates a named file mapping the way LuckyEngine's .NET
 * MemoryMappedFile.CreateNew does (CreateFileMappingW on the paging file), copies the
 * bytes of a file into it, prints "NAME PID", and keeps the mapping open until its
 * standard input closes. It shares no code with lrbc-inspector.
 *
 * Usage: lrbc_writer.exe BYTES_FILE [NAME]     (NAME defaults to LuckyEngine_<pid>)
 * Build: x86_64-w64-mingw32-gcc -municode -O2 -o lrbc_writer.exe lrbc_writer.c
 */
#include <windows.h>
#include <stdio.h>
#include <wchar.h>

int wmain(int argc, wchar_t **argv) {
    if (argc < 2 || argc > 3) {
        fwprintf(stderr, L"usage: lrbc_writer BYTES_FILE [NAME]\n");
        return 2;
    }
    FILE *f = _wfopen(argv[1], L"rb");
    if (!f) {
        fwprintf(stderr, L"lrbc_writer: cannot open %ls\n", argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    if (size <= 0) {
        fwprintf(stderr, L"lrbc_writer: %ls is empty\n", argv[1]);
        return 1;
    }
    wchar_t name[256];
    if (argc == 3) {
        wcsncpy(name, argv[2], 255);
        name[255] = 0;
    } else {
        swprintf(name, 256, L"LuckyEngine_%lu", GetCurrentProcessId());
    }
    HANDLE h = CreateFileMappingW(INVALID_HANDLE_VALUE, NULL, PAGE_READWRITE, 0,
                                  (DWORD)size, name);
    if (!h) {
        fwprintf(stderr, L"lrbc_writer: CreateFileMappingW failed: %lu\n", GetLastError());
        return 1;
    }
    if (GetLastError() == ERROR_ALREADY_EXISTS) {
        fwprintf(stderr, L"lrbc_writer: %ls already exists\n", name);
        return 1;
    }
    unsigned char *view = MapViewOfFile(h, FILE_MAP_ALL_ACCESS, 0, 0, (SIZE_T)size);
    if (!view) {
        fwprintf(stderr, L"lrbc_writer: MapViewOfFile failed: %lu\n", GetLastError());
        return 1;
    }
    if (fread(view, 1, (size_t)size, f) != (size_t)size) {
        fwprintf(stderr, L"lrbc_writer: short read of %ls\n", argv[1]);
        return 1;
    }
    fclose(f);
    wprintf(L"%ls %lu\n", name, GetCurrentProcessId());
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
    }
    UnmapViewOfFile(view);
    CloseHandle(h);
    return 0;
}
