/* amn/amn.h — everything an application needs. Plugins include amn/plugin.h. */
#ifndef AMN_AMN_H
#define AMN_AMN_H

#include "amn/checked.h"
#include "amn/context.h"
#include "amn/convert.h"
#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/format.h"
#include "amn/io.h"
#include "amn/model.h"
#include "amn/scan.h"
#include "amn/scheme.h"
#include "amn/simd.h"
#include "amn/tensor.h"
#include "amn/version.h"

#endif
