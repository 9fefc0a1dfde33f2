/* Functions we do not use (git's banned.h): unbounded or error-blind. */
#ifndef VRAMLEDGER_BANNED_H
#define VRAMLEDGER_BANNED_H
#define VL_BANNED(func) sorry_##func##_is_banned
#undef strcpy
#define strcpy(x, y) VL_BANNED(strcpy)
#undef strcat
#define strcat(x, y) VL_BANNED(strcat)
#undef sprintf
#define sprintf(...) VL_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) VL_BANNED(vsprintf)
#undef atoi
#define atoi(x) VL_BANNED(atoi)
#undef strtok
#define strtok(x, y) VL_BANNED(strtok)
#endif
