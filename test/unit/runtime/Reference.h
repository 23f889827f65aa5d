//===- Reference.h - float64 references and finite differences for kernel tests -===//
//
// Kernel tests compare the fp32 kernels with independent float64 code written
// from the textbook definitions, and check every backward kernel against
// central finite differences of that float64 forward.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_TEST_RUNTIME_REFERENCE_H
#define COLOSSAL_TEST_RUNTIME_REFERENCE_H

#include "colossal/runtime/TrackedAllocator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace colossal::rt::test {

/// A copy in tracked memory (the runtime's buffers).
inline Floats tracked(const std::vector<float> &values) { return Floats(values.begin(), values.end()); }

inline std::vector<float> randomVector(size_t n, unsigned seed, float low = -1.0f, float high = 1.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(engine);
  return v;
}

inline std::vector<double> widen(const std::vector<float> &v) { return {v.begin(), v.end()}; }

/// d(sum_i weights[i] * f(x)[i]) / dx by central differences in float64.
inline std::vector<double> numericGradient(const std::function<std::vector<double>(const std::vector<double> &)> &f,
                                           std::vector<double> x, const std::vector<double> &weights,
                                           double h = 1e-6) {
  std::vector<double> gradient(x.size());
  auto project = [&](const std::vector<double> &y) {
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i)
      sum += weights[i] * y[i];
    return sum;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    double saved = x[i];
    x[i] = saved + h;
    double plus = project(f(x));
    x[i] = saved - h;
    double minus = project(f(x));
    x[i] = saved;
    gradient[i] = (plus - minus) / (2 * h);
  }
  return gradient;
}

/// Every |got - want| <= atol + rtol * |want|, reporting the worst element.
template <typename Got, typename Want>
void expectClose(const std::vector<Got> &got, const std::vector<Want> &want, double rtol, double atol,
                 const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t worst = 0;
  double worstExcess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double excess = std::fabs(double(got[i]) - double(want[i])) - (atol + rtol * std::fabs(double(want[i])));
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  EXPECT_LE(worstExcess, 0.0) << what << ": element " << worst << " is " << double(got[worst])
                              << ", expected " << double(want[worst]) << " (rtol " << rtol << ", atol "
                              << atol << ")";
}

} // namespace colossal::rt::test

#endif // COLOSSAL_TEST_RUNTIME_REFERENCE_H
