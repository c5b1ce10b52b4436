/* pth_writer.h — `convert --to pth` (pth_writer.c). */
#ifndef AMN_PTH_WRITER_H
#define AMN_PTH_WRITER_H

#include "amn/format.h"

extern const amn_writer pth_writer;

#endif
