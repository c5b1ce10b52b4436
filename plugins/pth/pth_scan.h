/* pth_scan.h — `amn scan` of PyTorch checkpoints (ZIP, legacy and raw
 * pickles), and the member rules open() shares with it. */
#ifndef AMN_PTH_SCAN_H
#define AMN_PTH_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/scan.h"

/* Pre-1.6 torch.save: starts with a pickle of the magic number. */
bool pth_is_legacy(const uint8_t *p, uint64_t n);

/* Why a member (name relative to the checkpoint's root) makes the archive
 * one amn refuses (TorchScript, another pickle, Python source); NULL for
 * what torch.save writes. */
const char *pth_member_anomaly(const char *rel, size_t n);

int pth_scan(const amn_scan_args *a, amn_scan_report *r, amn_error *err);

#endif
