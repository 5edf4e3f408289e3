// Enqueues one planned attention call: shared by the attention API and the calls that are made of
// several attention calls (context parallelism).
#pragma once

#include "core/handle.h"
#include "core/plan.h"
#include "core/problem.h"

namespace ffpa {

// The kernel of `plan` on `snapshot.stream` with `workspace` (plan.workspaceBytes of it), the
// device view of the problem's slices, and the sanity check when the snapshot's policy asks for
// it. Allocates nothing. Throws ffpa::Error.
void launchPlan(const Context& context, const CallSnapshot& snapshot, const AttentionProblem& problem,
                const Plan& plan, TensorArgs tensors, void* workspace);

}  // namespace ffpa
