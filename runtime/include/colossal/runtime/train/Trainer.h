//===- Trainer.h - the main loop of an emitted training program ---*- C++ -*-===//
//
// An emitted program describes its step (inputs, parameters, the function
// computing the loss and the gradients, StepInterface.h) and the settings it
// was compiled with; `trainerMain` does the rest: flags, initial weights, feeds or
// synthetic data, the optimizer and learning-rate schedule, the step log, a
// progress line, checkpoints and resumption. Resuming from a checkpoint
// saved at step k and running to step n gives the same weights, bit for bit,
// as running to step n at once: the optimizer state, the step and the data
// position are all in the checkpoint, and the data of step s depends on s
// alone.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_TRAINER_H
#define COLOSSAL_RUNTIME_TRAINER_H

#include "colossal/runtime/train/StepInterface.h"

namespace colossal::rt {

/// The emitted program's main: parses argv, trains, returns the exit status.
/// Every failure is a message naming what and where, and a nonzero status.
int trainerMain(int argc, char **argv, const TrainingProgram &program);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_TRAINER_H
