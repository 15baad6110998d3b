// The older testdata form: check.eq returns all(actual == expected) as i1; inputs as a hex string.
module @jit_testcase {
  func.func public @main() -> tensor<i1> {
    %0 = call @inputs() : () -> tensor<2x3xf32>
    %1 = call @expected() : () -> tensor<2x3xf32>
    %2 = stablehlo.abs %0 : tensor<2x3xf32>
    %3 = stablehlo.custom_call @check.eq(%2, %1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<i1>
    return %3 : tensor<i1>
  }
  func.func private @inputs() -> tensor<2x3xf32> {
    %0 = stablehlo.constant dense<"0x0000803F000000C0000040400000804000000000000080BF"> : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @expected() -> tensor<2x3xf32> {
    %0 = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 0.0, 1.0]]> : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
