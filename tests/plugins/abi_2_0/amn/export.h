/* amn/export.h — symbol visibility for libamn's public API. */
#ifndef AMN_EXPORT_H
#define AMN_EXPORT_H

#if defined(AMN_BUILDING_LIBRARY)
#define AMN_API __attribute__((visibility("default")))
#else
#define AMN_API
#endif

#endif
